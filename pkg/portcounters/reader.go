package portcounters

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Reader reads the counters of the ports it tracks. It is safe for concurrent use:
// Track runs after every scan while reads run for scrapes and health polls.
type Reader struct {
	root string

	mu sync.Mutex
	// ports is replaced by Track, never changed in place, so that a read works on the
	// slice it took.
	ports []trackedPort
}

// trackedPort is a port with what Track found out about it.
type trackedPort struct {
	Port
	// dir is the port's directory on disk, below the root and free of symbolic links;
	// empty when it could not be resolved, which reads as nothing.
	dir string
	// hw are the file names of hw_counters/ at Track, sorted, lifespan left out.
	hw []string
	// hwLinkDowned is the index of link_downed in hw, -1 if none: soft-RoCE counts link
	// downs there and has no counters/.
	hwLinkDowned int
}

// NewReader returns a reader of the sysfs tree at root that tracks no port yet.
func NewReader(root string) *Reader { return &Reader{root: root} }

// Track makes ports the ones read from now on: the ports published after a scan. It
// resolves each port's directory and lists its hw_counters, the only directory listings
// the reader makes; a port whose directory cannot be resolved is tracked and read as
// having no counters.
func (r *Reader) Track(ports []Port) {
	f, err := sysfs.Open(r.root)
	tracked := make([]trackedPort, 0, len(ports))
	for _, p := range ports {
		tp := trackedPort{Port: p, hwLinkDowned: -1}
		if err == nil {
			if dir, rerr := f.Resolve("class/infiniband/" + p.IBDev + "/ports/" + strconv.Itoa(p.Port)); rerr == nil {
				abs := filepath.Join(r.root, filepath.FromSlash(dir))
				tp.dir = abs
				tp.hw = listCounters(abs + "/" + HWCountersDir)
			}
		}
		tp.hwLinkDowned = slices.Index(tp.hw, counterFiles[LinkDowned])
		tracked = append(tracked, tp)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ports = tracked
}

// Ports returns the tracked ports, in the order of Track.
func (r *Reader) Ports() []Port {
	ports := r.tracked()
	out := make([]Port, len(ports))
	for i := range ports {
		out[i] = ports[i].Port
	}
	return out
}

func (r *Reader) tracked() []trackedPort {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ports
}

// listCounters lists a counter directory without following a link to it: its file
// names, sorted, lifespan left out; nil when there is no such directory.
func listCounters(dir string) []string {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	d := os.NewFile(uintptr(fd), dir)
	defer func() { _ = d.Close() }()
	entries, err := d.ReadDir(-1)
	if err != nil {
		return nil
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != lifespanFile {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Read reads every tracked port's named counters and hw_counters.
func (r *Reader) Read() Reading {
	ports := r.tracked()
	out := Reading{Ports: make([]PortReading, len(ports))}
	var buf [32]byte
	for i := range ports {
		tp := &ports[i]
		pr := &out.Ports[i]
		pr.Port = tp.Port
		if tp.dir == "" {
			continue
		}
		dirfd, err := openAt(unix.AT_FDCWD, tp.dir, unix.O_DIRECTORY)
		if err != nil {
			continue // the port is gone; the next scan stops tracking it
		}
		if cfd, err := openAt(dirfd, CountersDir, unix.O_DIRECTORY); err == nil {
			for c := range NumCounters {
				pr.Values[c], pr.Has[c] = readCounter(cfd, counterFiles[c], &buf, &out.Errors)
			}
			_ = unix.Close(cfd)
		}
		if len(tp.hw) > 0 {
			if hfd, err := openAt(dirfd, HWCountersDir, unix.O_DIRECTORY); err == nil {
				pr.HW = make([]HWCounter, 0, len(tp.hw))
				for j, name := range tp.hw {
					if v, ok := readCounter(hfd, name, &buf, &out.Errors); ok {
						pr.HW = append(pr.HW, HWCounter{Name: name, Value: v})
						if j == tp.hwLinkDowned && !pr.Has[LinkDowned] {
							pr.Values[LinkDowned], pr.Has[LinkDowned] = v, true
						}
					}
				}
				_ = unix.Close(hfd)
			}
		}
		_ = unix.Close(dirfd)
	}
	return out
}

// LinkErrors are the counters a health poll looks at to find a port that flaps.
type LinkErrors struct {
	Port
	LinkDowned, SymbolError       uint64
	HasLinkDowned, HasSymbolError bool
}

// ReadLinkErrors reads link_downed and symbol_error of every tracked port: two files
// per port (link_downed from hw_counters/ where counters/ lacks it), for a poll every
// second.
func (r *Reader) ReadLinkErrors() []LinkErrors {
	ports := r.tracked()
	out := make([]LinkErrors, len(ports))
	var buf [32]byte
	errs := 0
	for i := range ports {
		tp := &ports[i]
		le := &out[i]
		le.Port = tp.Port
		if tp.dir == "" {
			continue
		}
		dirfd, err := openAt(unix.AT_FDCWD, tp.dir, unix.O_DIRECTORY)
		if err != nil {
			continue
		}
		if cfd, err := openAt(dirfd, CountersDir, unix.O_DIRECTORY); err == nil {
			le.LinkDowned, le.HasLinkDowned = readCounter(cfd, counterFiles[LinkDowned], &buf, &errs)
			le.SymbolError, le.HasSymbolError = readCounter(cfd, counterFiles[SymbolError], &buf, &errs)
			_ = unix.Close(cfd)
		}
		if !le.HasLinkDowned && tp.hwLinkDowned >= 0 {
			if hfd, err := openAt(dirfd, HWCountersDir, unix.O_DIRECTORY); err == nil {
				le.LinkDowned, le.HasLinkDowned = readCounter(hfd, tp.hw[tp.hwLinkDowned], &buf, &errs)
				_ = unix.Close(hfd)
			}
		}
		_ = unix.Close(dirfd)
	}
	return out
}

// readCounter reads and parses one counter file in the directory dirfd. A file that does
// not exist is not read (false); one that exists but cannot be read or parsed counts in
// errs.
func readCounter(dirfd int, name string, buf *[32]byte, errs *int) (uint64, bool) {
	fd, err := openAt(dirfd, name, 0)
	if err != nil {
		if !errors.Is(err, syscall.ENOENT) {
			*errs++
		}
		return 0, false
	}
	n, err := readOnce(fd, buf[:])
	_ = unix.Close(fd)
	// A value fills at most 21 bytes with its newline: a full buffer is not a counter.
	if err != nil || n == 0 || n == len(buf) {
		*errs++
		return 0, false
	}
	b := buf[:n]
	if b[n-1] == '\n' {
		b = b[:n-1]
	}
	v, err := sysfs.ParseCounter(b)
	if err != nil {
		*errs++
		return 0, false
	}
	return v, true
}

// openAt opens name relative to dirfd read-only without following a final symbolic link.
func openAt(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW|flags, 0)
		if err != unix.EINTR {
			return fd, err
		}
	}
}

// readOnce reads what one read returns: a sysfs attribute returns its whole value at
// once, and so does a short regular file of a mock tree.
func readOnce(fd int, buf []byte) (int, error) {
	for {
		n, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		return n, err
	}
}

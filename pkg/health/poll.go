package health

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// classDir lists the RDMA devices (sysfs.md).
const classDir = "class/infiniband"

// Poller reads, cheaply and often, what no event announces: the state and phys_state of
// each port the last scan found, and the names of the RDMA devices. A poll is two file
// reads per port and one directory listing; it never runs discovery.
//
// It compares what it reads with the last scan (Track), not with its previous poll: as
// long as the node differs from what was published, every poll says so. A change that
// was held back (damping) or whose rescan failed is therefore never forgotten.
//
// A Poller is safe for concurrent use: Track runs in the publisher, Poll in the monitor.
type Poller struct {
	root string

	mu     sync.Mutex
	ports  []trackedPort
	ibdevs map[string]bool
	// others are the devices listed at the last scan that gave no ports, mapped to
	// whether they had a port directory: a device whose ports appear only after its
	// directory (it is being registered) is new once they do, while one discovery
	// cannot use despite its ports is left to the full rescan instead of rescanning on
	// every poll.
	others map[string]bool
}

// trackedPort is one port to poll.
type trackedPort struct {
	id PortID
	// dir is the port's directory on disk, below the root and free of symbolic links,
	// resolved once per scan so that a poll follows no link; empty when it could not be
	// resolved, which reads as unknown.
	dir string
	// scanned is the state the last scan found.
	scanned PortState
}

// NewPoller returns a poller of the sysfs tree at root that tracks nothing yet.
func NewPoller(root string) *Poller {
	return &Poller{root: root, ibdevs: map[string]bool{}, others: map[string]bool{}}
}

// Track makes inv's ports the ones polled and their states the ones a poll compares
// with. The publisher calls it after every scan, whether the inventory changed or not.
func (p *Poller) Track(inv *discovery.Inventory) {
	f, err := sysfs.Open(p.root)
	ports := make([]trackedPort, 0, len(inv.Ports))
	ibdevs := map[string]bool{}
	for _, port := range inv.Ports {
		tp := trackedPort{id: PortID{port.IBDev, port.Port}, scanned: PortState{State: port.State, PhysState: port.PhysState}}
		if err == nil {
			if dir, rerr := f.Resolve(portDir(tp.id)); rerr == nil {
				tp.dir = filepath.Join(p.root, filepath.FromSlash(dir))
			}
		}
		ports = append(ports, tp)
		ibdevs[port.IBDev] = true
	}
	slices.SortFunc(ports, func(a, b trackedPort) int { return comparePortIDs(a.id, b.id) })
	others := map[string]bool{}
	names, _ := p.listDevices() // an unreadable list fails the next poll
	for _, name := range names {
		if !ibdevs[name] {
			others[name] = p.hasPorts(name)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ports, p.ibdevs, p.others = ports, ibdevs, others
}

func portDir(id PortID) string {
	return classDir + "/" + id.IBDev + "/ports/" + strconv.Itoa(id.Port)
}

// PollResult is what one poll found.
type PollResult struct {
	// States is the state of every tracked port now.
	States map[PortID]PortState
	// Changes says, one line each, how the node differs from the last scan: a port
	// state, a device that appeared or disappeared. Empty when it does not.
	Changes []string
}

// Poll reads the tracked ports' states and the device list once. It fails only when the
// device list cannot be read; a port file that cannot be read is an unknown state.
func (p *Poller) Poll() (PollResult, error) {
	p.mu.Lock()
	ports, ibdevs, others := p.ports, p.ibdevs, p.others
	p.mu.Unlock()

	res := PollResult{States: make(map[PortID]PortState, len(ports))}
	for _, tp := range ports {
		now := PortState{
			State:     p.read(tp.dir, "state", sysfs.ParsePortState),
			PhysState: p.read(tp.dir, "phys_state", sysfs.ParsePhysState),
		}
		res.States[tp.id] = now
		if now != tp.scanned {
			res.Changes = append(res.Changes, fmt.Sprintf("%s: %s -> %s", tp.id, tp.scanned, now))
		}
	}

	names, err := p.listDevices()
	if err != nil {
		return res, err
	}
	present := make(map[string]bool, len(names))
	for _, name := range names {
		present[name] = true
		if ibdevs[name] {
			continue
		}
		if hadPorts, known := others[name]; !known || (!hadPorts && p.hasPorts(name)) {
			res.Changes = append(res.Changes, "RDMA device "+name+" appeared")
		}
	}
	for _, name := range sortedNames(ibdevs) {
		if !present[name] {
			res.Changes = append(res.Changes, "RDMA device "+name+" disappeared")
		}
	}
	return res, nil
}

// read reads one state file of a port and parses it the way discovery does: what cannot
// be read or parsed is the empty name. It costs three system calls and no allocation
// beyond the path: os.ReadFile would add a stat and a page-sized buffer per file, which
// on a node with hundreds of VFs is most of a poll.
func (p *Poller) read(dir, file string, parse func(string) (string, error)) string {
	if dir == "" {
		return ""
	}
	fd, err := unix.Open(dir+"/"+file, unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	var buf [64]byte // "5: PortConfigurationTraining\n" is the longest value
	n, err := unix.Read(fd, buf[:])
	_ = unix.Close(fd)
	if err != nil || n <= 0 || n == len(buf) {
		return ""
	}
	name, err := parse(strings.TrimSuffix(string(buf[:n]), "\n"))
	if err != nil {
		return ""
	}
	return name
}

// listDevices lists class/infiniband; a node without the directory has no devices.
func (p *Poller) listDevices() ([]string, error) {
	d, err := os.Open(filepath.Join(p.root, filepath.FromSlash(classDir)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	defer func() { _ = d.Close() }()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	return names, nil
}

// hasPorts reports whether the device has a port directory that discovery would use.
// Only devices missing from the last scan are looked at, which is rare.
func (p *Poller) hasPorts(ibdev string) bool {
	f, err := sysfs.Open(p.root)
	if err != nil {
		return false
	}
	names, err := f.ReadDirNames(classDir + "/" + ibdev + "/ports")
	if err != nil {
		return false
	}
	for _, n := range names {
		if v, err := strconv.Atoi(n); err == nil && v > 0 && strconv.Itoa(v) == n {
			return true
		}
	}
	return false
}

func sortedNames(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

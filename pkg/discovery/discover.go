package discovery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Options configure a Discoverer.
type Options struct {
	// SysfsRoot is the directory sysfs is read from; empty means sysfs.DefaultRoot.
	SysfsRoot string
	// FS, when set, is read instead of SysfsRoot, e.g. an in-memory tree in a test.
	FS fs.ReadLinkFS
	// UseNetlink asks the kernel's RDMA netlink family for the netns mode before reading
	// the module parameter file. Only right on a live host: a mock tree's mode is in its
	// file, and netlink would describe the machine the test runs on.
	UseNetlink bool
}

// Discoverer scans a sysfs tree for RDMA ports. It remembers which problems it has logged,
// so that rescanning a node with the same broken file does not repeat the warning; use one
// Discoverer per node for the life of the process. It is safe for concurrent use.
type Discoverer struct {
	opts Options
	// netnsFromNetlink is the netlink query; a seam for tests.
	netnsFromNetlink func() (string, error)

	mu       sync.Mutex
	reported map[string]struct{}
	// hint is the size of the last scan's caches, for the next one's (see open).
	hint sysfs.SizeHint
}

// New returns a Discoverer for opts.
func New(opts Options) *Discoverer {
	if opts.SysfsRoot == "" {
		opts.SysfsRoot = sysfs.DefaultRoot
	}
	return &Discoverer{opts: opts, netnsFromNetlink: netlinkNetnsMode, reported: map[string]struct{}{}}
}

// Discover scans the tree once and returns every port of every RDMA device, sorted by
// ComparePorts. Only an unusable root is an error: a node without RDMA devices yields an
// empty inventory, and a missing or garbled file leaves that one fact unknown.
func (d *Discoverer) Discover(ctx context.Context) (*Inventory, error) {
	f, err := d.open()
	if err != nil {
		return nil, err
	}

	defer d.remember(f)
	s := &scan{d: d, fs: f, logger: klog.FromContext(ctx), pfModels: map[string]string{}}
	inv := &Inventory{NetnsMode: s.netnsMode(), Ports: []Port{}}
	ibdevs, err := f.ReadDirNames("class/infiniband")
	if errors.Is(err, fs.ErrNotExist) {
		return inv, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list RDMA devices: %w", err)
	}
	chars := s.charDevs()
	perDevice, err := s.devices(ctx, ibdevs, chars)
	if err != nil {
		return nil, err
	}
	for _, ports := range perDevice {
		inv.Ports = append(inv.Ports, ports...)
	}
	s.gpuDirect(inv.Ports)
	s.dataDirect(inv.Ports)
	SortPorts(inv.Ports)
	return inv, nil
}

// gpuDirect fills each port's GPUDirect from the NVIDIA driver's modules, read once.
func (s *scan) gpuDirect(ports []Port) {
	d, err := ReadGPUDriver(s.fs)
	if err != nil {
		s.unknown(nvidiaModuleTaint, err)
	}
	for i := range ports {
		ports[i].GPUDirect, _ = d.GPUDirect(&ports[i])
	}
}

// maxScanWorkers bounds the devices scanned at once. A scan is almost all system calls
// (open, read, close, lstat: some hundred per port, each independent of other devices),
// so spreading devices over the CPUs shortens a scan of a large node nearly in proportion;
// the bound keeps a many-core node from running a burst of threads for it.
const maxScanWorkers = 8

// devices scans each RDMA device on up to maxScanWorkers goroutines and returns the ports
// of ibdevs[i] at index i, so the result does not depend on scheduling.
func (s *scan) devices(ctx context.Context, ibdevs []string, chars *charIndex) ([][]Port, error) {
	out := make([][]Port, len(ibdevs))
	workers := min(maxScanWorkers, runtime.GOMAXPROCS(0), len(ibdevs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				out[i] = s.device(ibdevs[i], chars)
			}
		})
	}
	var err error
feed:
	for i := range ibdevs {
		select {
		case <-ctx.Done():
			err = fmt.Errorf("discover RDMA ports: %w", ctx.Err())
			break feed
		case next <- i:
		}
	}
	close(next)
	wg.Wait()
	return out, err
}

// open returns a fresh view of the tree: an FS caches resolved paths, so each scan needs
// its own to see devices that came or went.
// Its caches start at the size the previous scan's ended with (scans of one node are
// alike); Discover records that size when it is done.
func (d *Discoverer) open() (*sysfs.FS, error) {
	var f *sysfs.FS
	if d.opts.FS != nil {
		f = sysfs.NewFS(d.opts.FS)
	} else {
		var err error
		if f, err = sysfs.Open(d.opts.SysfsRoot); err != nil {
			return nil, fmt.Errorf("discover RDMA ports: %w", err)
		}
	}
	d.mu.Lock()
	hint := d.hint
	d.mu.Unlock()
	f.Reserve(hint)
	return f, nil
}

// remember keeps the size of a finished scan's caches for the next scan.
func (d *Discoverer) remember(f *sysfs.FS) {
	h := f.Hint()
	d.mu.Lock()
	d.hint = h
	d.mu.Unlock()
}

// firstReport reports whether the problem key has not been logged by this Discoverer yet,
// and records it.
func (d *Discoverer) firstReport(key string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.reported[key]; ok {
		return false
	}
	d.reported[key] = struct{}{}
	return true
}

// scan is the state of one Discover call.
type scan struct {
	d      *Discoverer
	fs     *sysfs.FS
	logger logr.Logger
	// mu guards pfModels: devices are scanned concurrently (see devices).
	mu sync.Mutex
	// pfModels caches the model of each PF by canonical path.
	pfModels map[string]string
}

// unknown logs, once per Discoverer, that a fact could not be read.
func (s *scan) unknown(fact string, err error) {
	if s.d.firstReport(fact + "\x00" + err.Error()) {
		s.logger.Info("Leaving fact unknown", "fact", fact, "err", err)
	}
}

// read reads and parses one file; on failure it logs (naming the file, which names the
// fact) and returns ok false.
func read[T any](s *scan, name string, parse func(string) (T, error)) (T, bool) {
	v, err := sysfs.Read(s.fs, name, parse)
	if err != nil {
		s.unknown(name, err)
		return v, false
	}
	return v, true
}

// readOptional is read for files that are legitimately absent on some nodes (board_id,
// a GID entry's ndev): absence is silent, garbage is still logged.
func readOptional[T any](s *scan, name string, parse func(string) (T, error)) (T, bool) {
	v, err := sysfs.Read(s.fs, name, parse)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.unknown(name, err)
		}
		return v, false
	}
	return v, true
}

// text returns a free-text file as it is.
func text(s string) (string, error) { return s, nil }

// numberedNames returns the entries of dir whose names are prefix followed by a decimal
// number, sorted by that number (uverbs2 before uverbs10).
func numberedNames(names []string, prefix string) []numbered {
	var out []numbered
	for _, n := range names {
		if len(n) <= len(prefix) || n[:len(prefix)] != prefix {
			continue
		}
		v, err := sysfs.ParseDecimal(n[len(prefix):])
		if err != nil {
			continue
		}
		out = append(out, numbered{name: n, num: v})
	}
	slices.SortFunc(out, func(a, b numbered) int { return cmp.Compare(a.num, b.num) })
	return out
}

type numbered struct {
	name string
	num  int
}

// portNumbers returns the ports of a device from the names below ports/, in order.
func portNumbers(names []string) []int {
	var out []int
	for _, nb := range numberedNames(names, "") {
		if nb.num > 0 && strconv.Itoa(nb.num) == nb.name {
			out = append(out, nb.num)
		}
	}
	return out
}

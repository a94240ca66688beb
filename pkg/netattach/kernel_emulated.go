package netattach

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// EmulatedKernel is an RDMAKernel for machines without an RDMA subsystem (development
// hosts, the local cluster's mock node): it does to a mock sysfs tree (pkg/mocknode's
// layout, below root) what the kernel does to the real one. When an address is added to
// a netdev it writes a RoCE v1 entry (if the port has RoCE v1 entries at all, as mlx5
// ports do and irdma ports do not) and a RoCE v2 entry into the first unused slots of
// the port's GID table, as the kernel does; when the address goes, it clears them. RDMA
// device moves are only recorded (and logged): nothing in the tree says which namespace
// a device is in.
//
// Writes are atomic per file (a temporary file renamed into place), and an entry's GID
// is written last and cleared first, so a reader never sees a valid GID with a missing
// type. One EmulatedKernel must own a tree: it serializes its own writers only.
type EmulatedKernel struct {
	root string
	// GIDTimeout bounds FindGID; GIDInterval paces its polls.
	GIDTimeout, GIDInterval time.Duration
	// Clock times FindGID's polls; nil is the real clock.
	Clock clock.Clock

	mu    sync.Mutex
	moved map[string]int // ibdev -> the namespace fd it was moved into
}

var _ RDMAKernel = (*EmulatedKernel)(nil)

// NewEmulatedKernel returns an emulated RDMA kernel over the mock sysfs tree at root
// (the --sysfs-root of the mock node, DIR/sys).
func NewEmulatedKernel(root string) *EmulatedKernel {
	return &EmulatedKernel{root: root, GIDTimeout: defaultGIDTimeout, GIDInterval: defaultGIDInterval, moved: map[string]int{}}
}

// MoveDevice records that ibdev is in the pod's namespace.
func (k *EmulatedKernel) MoveDevice(ctx context.Context, ibdev string, netnsFD int) error {
	if err := k.checkDevice(ibdev); err != nil {
		return err
	}
	k.mu.Lock()
	k.moved[ibdev] = netnsFD
	k.mu.Unlock()
	klog.FromContext(ctx).Info("Emulated RDMA device move into the pod", "ibdev", ibdev)
	return nil
}

// ReturnDevice records that ibdev is back in the host.
func (k *EmulatedKernel) ReturnDevice(ctx context.Context, ibdev string, podNetnsFD, hostNetnsFD int) error {
	k.mu.Lock()
	delete(k.moved, ibdev)
	k.mu.Unlock()
	klog.FromContext(ctx).Info("Emulated RDMA device return to the host", "ibdev", ibdev, "podNamespaceGone", podNetnsFD < 0)
	return nil
}

// Moved reports whether ibdev is recorded as moved into a pod.
func (k *EmulatedKernel) Moved(ibdev string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.moved[ibdev]
	return ok
}

func (k *EmulatedKernel) checkDevice(ibdev string) error {
	if _, err := sysfs.ParseDeviceName(ibdev); err != nil {
		return fmt.Errorf("RDMA device name: %w", err)
	}
	if _, err := os.Stat(filepath.Join(k.root, "class/infiniband", ibdev)); err != nil {
		return fmt.Errorf("RDMA device %s: %w", ibdev, err)
	}
	return nil
}

// gidSlot is one entry of an emulated GID table as read from the tree.
type gidSlot struct {
	gid  sysfs.GID
	typ  string // "" when unused
	ndev string
}

// readTable reads the whole GID table of a port directory.
func readTable(dir string) ([]gidSlot, error) {
	entries, err := os.ReadDir(filepath.Join(dir, "gids"))
	if err != nil {
		return nil, fmt.Errorf("list GIDs: %w", err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	idx := numeric(names)
	if len(idx) == 0 {
		return nil, nil
	}
	table := make([]gidSlot, idx[len(idx)-1]+1)
	for _, i := range idx {
		s := strconv.Itoa(i)
		b, err := os.ReadFile(filepath.Join(dir, "gids", s))
		if err != nil {
			return nil, fmt.Errorf("read GID %d: %w", i, err)
		}
		g, err := sysfs.ParseGID(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, fmt.Errorf("GID %d: %w", i, err)
		}
		table[i].gid = g
		if b, err := os.ReadFile(filepath.Join(dir, "gid_attrs/types", s)); err == nil {
			table[i].typ = strings.TrimSpace(string(b))
		}
		if b, err := os.ReadFile(filepath.Join(dir, "gid_attrs/ndevs", s)); err == nil {
			table[i].ndev = strings.TrimSpace(string(b))
		}
	}
	return table, nil
}

// AddressAdded writes the GID entries the kernel would add for addr on ndev. It is
// idempotent: entries that are there already are not written twice.
func (k *EmulatedKernel) AddressAdded(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) error {
	if err := checkPort(ibdev, port); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	dir := filepath.Join(k.root, portDir(ibdev, port))
	table, err := readTable(dir)
	if err != nil {
		return fmt.Errorf("emulate GID add on %s port %d: %w", ibdev, port, err)
	}
	gid := sysfs.GID(addr.As16())
	types := []string{string(sysfs.GIDTypeRoCEv2)}
	for _, s := range table {
		if s.typ == string(sysfs.GIDTypeRoCEv1) {
			types = []string{string(sysfs.GIDTypeRoCEv1), string(sysfs.GIDTypeRoCEv2)}
			break
		}
	}
	next := 0
	for _, typ := range types {
		if containsSlot(table, gid, typ, ndev) {
			continue
		}
		for next < len(table) && (table[next].typ != "" || !table[next].gid.IsZero()) {
			next++
		}
		if next == len(table) {
			return fmt.Errorf("emulate GID add on %s port %d: GID table full", ibdev, port)
		}
		s := strconv.Itoa(next)
		for _, f := range []struct{ name, value string }{
			{"gid_attrs/ndevs/" + s, ndev}, {"gid_attrs/types/" + s, typ}, {"gids/" + s, gid.String()},
		} {
			if err := writeAtomic(filepath.Join(dir, f.name), f.value+"\n"); err != nil {
				return fmt.Errorf("emulate GID add on %s port %d: %w", ibdev, port, err)
			}
		}
		table[next] = gidSlot{gid: gid, typ: typ, ndev: ndev}
		klog.FromContext(ctx).V(4).Info("Emulated GID entry added", "ibdev", ibdev, "port", port, "index", next, "type", typ, "ndev", ndev, "addr", addr)
	}
	return nil
}

func containsSlot(table []gidSlot, gid sysfs.GID, typ, ndev string) bool {
	for _, s := range table {
		if s.gid == gid && s.typ == typ && s.ndev == ndev {
			return true
		}
	}
	return false
}

// AddressRemoved clears the GID entries of addr on ndev, if any.
func (k *EmulatedKernel) AddressRemoved(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) error {
	if err := checkPort(ibdev, port); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	dir := filepath.Join(k.root, portDir(ibdev, port))
	table, err := readTable(dir)
	if err != nil {
		return fmt.Errorf("emulate GID removal on %s port %d: %w", ibdev, port, err)
	}
	gid := sysfs.GID(addr.As16())
	for i, s := range table {
		if s.gid != gid || s.ndev != ndev || s.typ == "" {
			continue
		}
		name := strconv.Itoa(i)
		if err := writeAtomic(filepath.Join(dir, "gids", name), sysfs.GID{}.String()+"\n"); err != nil {
			return fmt.Errorf("emulate GID removal on %s port %d: %w", ibdev, port, err)
		}
		for _, f := range []string{"gid_attrs/types/" + name, "gid_attrs/ndevs/" + name} {
			if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
				return fmt.Errorf("emulate GID removal on %s port %d: %w", ibdev, port, err)
			}
		}
		klog.FromContext(ctx).V(4).Info("Emulated GID entry removed", "ibdev", ibdev, "port", port, "index", i, "ndev", ndev, "addr", addr)
	}
	return nil
}

// FindGID polls the mock GID table like SysfsKernel.FindGID polls the real one.
func (k *EmulatedKernel) FindGID(ctx context.Context, ibdev string, port int, ndev string, addr netip.Addr) (int, error) {
	return pollGID(ctx, k.Clock, k.root, ibdev, port, ndev, addr, k.GIDTimeout, k.GIDInterval)
}

// writeAtomic replaces the file name with value: readers see the old or the new content.
func writeAtomic(name, value string) error {
	return atomicfile.WriteFile(name, []byte(value), 0o644)
}

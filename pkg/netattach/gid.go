package netattach

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"slices"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// ErrGIDNotFound is wrapped by FindGID when the entry did not appear in time.
var ErrGIDNotFound = errors.New("no RoCE v2 GID entry for the address")

// GID lookup pacing: the kernel adds a RoCE GID from a workqueue shortly after the
// address; two seconds is far beyond what that takes on a healthy node.
const (
	defaultGIDTimeout  = 2 * time.Second
	defaultGIDInterval = 20 * time.Millisecond
)

// portDir is the sysfs directory of an RDMA port, relative to the sysfs root.
func portDir(ibdev string, port int) string {
	return path.Join("class/infiniband", ibdev, "ports", strconv.Itoa(port))
}

// checkPort refuses names that would not stay a single path component below the root,
// and ports that cannot exist, before anything is read or written.
func checkPort(ibdev string, port int) error {
	if _, err := sysfs.ParseDeviceName(ibdev); err != nil {
		return fmt.Errorf("RDMA device name: %w", err)
	}
	if port < 1 || port > 255 {
		return fmt.Errorf("RDMA port %d out of range 1-255", port)
	}
	return nil
}

// gidIndexOf scans the GID table of ibdev/port below root once for the RoCE v2 entry
// whose GID is addr (IPv4 addresses as IPv4-mapped). When the entry's netdev is
// readable it must be ndev. found is false when there is none yet.
func gidIndexOf(root, ibdev string, port int, ndev string, addr netip.Addr) (idx int, found bool, err error) {
	if err := checkPort(ibdev, port); err != nil {
		return 0, false, err
	}
	fsys, err := sysfs.Open(root) // a new FS per scan: FS caches listings
	if err != nil {
		return 0, false, err
	}
	dir := portDir(ibdev, port)
	names, err := fsys.ReadDirNames(dir + "/gid_attrs/types")
	if err != nil {
		return 0, false, fmt.Errorf("list GID types of %s port %d: %w", ibdev, port, err)
	}
	want := sysfs.GID(addr.As16())
	for _, i := range numeric(names) {
		s := strconv.Itoa(i)
		// Unused entries fail to read on a real node and are absent in fixtures.
		typ, err := sysfs.Read(fsys, dir+"/gid_attrs/types/"+s, sysfs.ParseGIDType)
		if err != nil || typ != sysfs.GIDTypeRoCEv2 {
			continue
		}
		gid, err := sysfs.Read(fsys, dir+"/gids/"+s, sysfs.ParseGID)
		if err != nil || gid != want {
			continue
		}
		if nd, err := sysfs.Read(fsys, dir+"/gid_attrs/ndevs/"+s, sysfs.ParseIfName); err == nil && ndev != "" && nd != ndev {
			continue
		}
		return i, true, nil
	}
	return 0, false, nil
}

// numeric returns the names that are decimal indices, sorted numerically.
func numeric(names []string) []int {
	var out []int
	for _, n := range names {
		if i, err := strconv.Atoi(n); err == nil && i >= 0 {
			out = append(out, i)
		}
	}
	slices.Sort(out)
	return out
}

// pollGID calls gidIndexOf until it finds the entry, the timeout passes on clk (nil is
// the real clock) or ctx ends.
func pollGID(ctx context.Context, clk clock.Clock, root, ibdev string, port int, ndev string, addr netip.Addr, timeout, interval time.Duration) (int, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	deadline := clk.Now().Add(timeout)
	for {
		idx, found, err := gidIndexOf(root, ibdev, port, ndev, addr)
		if err != nil {
			return 0, err
		}
		if found {
			return idx, nil
		}
		if !clk.Now().Before(deadline) {
			return 0, fmt.Errorf("%w %s on %s after %s", ErrGIDNotFound, addr, ndev, timeout)
		}
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("wait for the GID of %s: %w", addr, context.Cause(ctx))
		case <-t.C():
		}
	}
}

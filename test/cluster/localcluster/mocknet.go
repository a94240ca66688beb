package localcluster

import (
	"context"
	"fmt"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode/mocknet"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// setupMockNetdevs makes a real host interface for every netdev of the mock tree that an
// RDMA port uses (docs/local-cluster.md, "Mock netdevs"), after probing which link kinds
// the kernel has, and records them for cluster-down.
func (c *Cluster) setupMockNetdevs(ctx context.Context, f *host.Facts) error {
	l, log := c.Layout, c.Log
	plan, err := mocknet.PlanTree(ctx, l.MockSys())
	if err != nil {
		return fmt.Errorf("mock netdevs: %w", err)
	}
	if len(plan.Links) == 0 {
		log.Info("the mock node has no netdevs on RDMA ports; no stand-ins")
		return mocknet.WriteRecord(l.MockNetRecord(), plan)
	}
	kernel, err := mocknet.Probe()
	if err != nil {
		return fmt.Errorf("probe link kinds: %w", err)
	}
	log.Info("kernel link kinds", "kinds", kernel.String())
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	nodeIP, _ := netip.AddrFromSlice(f.NodeIP)
	rec, err := mocknet.Create(h, plan, mocknet.CreateOptions{
		Kernel: kernel, NodeIP: nodeIP.Unmap(), Log: log,
		Save: func(p *mocknet.Plan) error { return mocknet.WriteRecord(l.MockNetRecord(), p) },
	})
	if err != nil {
		return fmt.Errorf("mock netdevs: %w", err)
	}
	log.Info("mock netdevs are up", "count", len(rec.Links), "record", l.MockNetRecord())
	return nil
}

// removeMockNetdevs deletes the interfaces the record names (and finds with the recorded
// kind and MAC); nothing else.
func (c *Cluster) removeMockNetdevs() error {
	rec, err := mocknet.ReadRecord(c.Layout.MockNetRecord())
	if err != nil || len(rec.Links) == 0 {
		return err
	}
	h, err := netlink.NewHandle()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	defer h.Close()
	if err := mocknet.Remove(h, rec, c.Log); err != nil {
		return err
	}
	return os.Remove(c.Layout.MockNetRecord())
}

// shareNetnsDir makes containerd's network namespace directory a shared bind mount of
// itself before containerd starts, so that the namespaces it mounts there later reach
// the driver's plugin container, which mounts the directory with HostToContainer
// propagation. On a host whose root mount is private (no systemd) they would not.
func shareNetnsDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind mount %s: %w", dir, err)
	}
	if err := unix.Mount("", dir, "", unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make %s a shared mount: %w", dir, err)
	}
	return nil
}

package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// gidEntriesPerAddress is what one address of a netdev on a RoCE port takes of the
// port's GID table: one entry per RoCE version, v1 and v2 on the adapters that have both.
const gidEntriesPerAddress = 2

// errGIDTableFull is wrapped by NodeGuard.Attach when an attachment's GID entries would
// not fit the port's GID table.
var errGIDTableFull = errors.New("GID table full")

// NodeGuard is the attacher as the plugin runs it, with what the node itself must keep
// and pkg/netattach (mechanics, no policy) does not know of:
//   - room in the port's GID table: an attachment whose addresses' GID entries would not
//     fit is refused before anything changes on the node (Attach);
//   - the node's own addresses, which an address pool must never hand out
//     (nodeAddresses, read by Network.allocate at allocation time).
//
// The plugin runs on the host network, so its network namespace is the host's.
type NodeGuard struct {
	Attacher
	// SysfsRoot is where the ports' GID tables are read.
	SysfsRoot string
	// NodeIPs are the kubelet's node IPs (--node-ips).
	NodeIPs []netip.Addr
	// hostAddrs lists the addresses the host's network namespace holds and its routes'
	// gateways (netattach.Attacher.NodeAddresses).
	hostAddrs func() ([]netip.Addr, error)
	// freeGIDs counts the free entries of a port's GID table.
	freeGIDs func(root, ibdev string, port int) (int, error)

	mu sync.Mutex
	// pending holds, per port, the GID entries of attachments under way: the kernel adds
	// them only when the addresses are configured, so two pods attached at once on a
	// nearly full port would both see room for themselves in the table.
	pending map[gidPort]int
}

// gidPort names one port's GID table.
type gidPort struct {
	ibdev string
	port  int
}

// NewNodeGuard wraps a for the node whose sysfs is below sysfsRoot and whose node IPs
// are nodeIPs, reading the host's addresses and GID tables for real.
func NewNodeGuard(a Attacher, sysfsRoot string, nodeIPs []netip.Addr) *NodeGuard {
	return &NodeGuard{
		Attacher: a, SysfsRoot: sysfsRoot, NodeIPs: nodeIPs,
		hostAddrs: hostAddressesOf(a), freeGIDs: discovery.FreeGIDEntries,
		pending: map[gidPort]int{},
	}
}

// hostAddressesOf returns how to read the host's addresses: from the attacher itself,
// which refuses the same addresses (netattach's node boundary), so that the two never
// disagree; an attacher that cannot say (a test's) makes allocation fail closed.
func hostAddressesOf(a Attacher) func() ([]netip.Addr, error) {
	na, ok := a.(interface {
		NodeAddresses(context.Context) ([]netip.Addr, error)
	})
	if !ok {
		return func() ([]netip.Addr, error) { return nil, errors.New("the attacher cannot list the node's addresses") }
	}
	return func() ([]netip.Addr, error) { return na.NodeAddresses(context.Background()) }
}

// Attach refuses an attachment whose GID entries would not fit the port's GID table,
// before the attacher journals or changes anything, and attaches otherwise. A refusal
// returns an empty State, which tells Network that nothing is left to undo.
func (g *NodeGuard) Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error) {
	need := gidEntriesNeeded(spec)
	key := gidPort{ibdev: spec.IBDevice, port: spec.IBPort}
	if key.ibdev == "" {
		key.ibdev = spec.RDMADevice
	}
	if need == 0 || key.ibdev == "" {
		return g.Attacher.Attach(ctx, spec, target, save)
	}
	if err := g.reserve(key, need, len(spec.Addresses)); err != nil {
		return netattach.State{}, err
	}
	defer g.release(key, need)
	return g.Attacher.Attach(ctx, spec, target, save)
}

// reserve counts the free entries of key's GID table and, when need of them are free
// beyond those of the attachments under way, holds them until release.
func (g *NodeGuard) reserve(key gidPort, need, addresses int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	free, err := g.freeGIDs(g.SysfsRoot, key.ibdev, key.port)
	if err != nil {
		return fmt.Errorf("check room in the GID table: %w", err)
	}
	if avail := free - g.pending[key]; avail < need {
		return fmt.Errorf("%w: %s port %d has %d free entries (%d more held by attachments under way), the pod interface's %d address(es) need up to %d "+
			"(RoCE v1 and v2 for each, and for its IPv6 link-local address): detach other pods from the port first",
			errGIDTableFull, key.ibdev, key.port, free, g.pending[key], addresses, need)
	}
	g.pending[key] += need
	return nil
}

func (g *NodeGuard) release(key gidPort, need int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.pending[key] -= need; g.pending[key] <= 0 {
		delete(g.pending, key)
	}
}

// gidEntriesNeeded is the most GID entries an attachment adds to its port's table.
// macvlan and ipvlan children are new netdevs: the kernel adds entries for each of their
// addresses and for the IPv6 link-local address the child gets in a pod with IPv6 on
// (counted always: too few entries would fail the pod half way). move takes the port's
// netdev with its entries and adds those of the addresses given; IPoIB children add none
// (InfiniBand GIDs are the port's GUID, not per address).
func gidEntriesNeeded(spec netattach.Spec) int {
	switch spec.Mode {
	case netattach.ModeMacvlan, netattach.ModeIPVlan:
		return gidEntriesPerAddress * (len(spec.Addresses) + 1)
	case netattach.ModeMove:
		return gidEntriesPerAddress * len(spec.Addresses)
	}
	return 0
}

// nodeAddresses returns the addresses a pod must never get: every address of the
// host's network namespace, the gateways of its routes and the node IPs, read now, since
// they change while the plugin runs. It is what the attacher refuses (netattach's node
// boundary), so that the allocator never picks an address the attach would then refuse
// again on every retry of the pod.
func (g *NodeGuard) nodeAddresses() ([]netip.Addr, error) {
	addrs, err := g.hostAddrs()
	if err != nil {
		return nil, fmt.Errorf("read the node's addresses: %w", err)
	}
	return append(addrs, g.NodeIPs...), nil
}

// allocate returns the lowest address of pool r that is free for a pod interface: not in
// use (inUse, from the checkpoint) and not the node's (NodeGuard.nodeAddresses). It
// fails, and hands out nothing, when the node's addresses cannot be read. Without a
// NodeGuard (tests with a bare attacher) the node's addresses are unknown and not
// skipped.
func (p *Network) allocate(r nodeconfig.Range, inUse map[netip.Addr]bool) (netip.Prefix, error) {
	g, ok := p.attacher.(*NodeGuard)
	if !ok {
		return allocateAddress(r, inUse)
	}
	held, err := g.nodeAddresses()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("allocate from address pool %s: %w", r.Name, err)
	}
	return allocateAddress(r, inUse, held...)
}

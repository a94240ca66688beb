package podnet

import (
	"fmt"
	"net/netip"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Pod interface addresses from a node's address pools (nodeconfig.AddressPool). The
// allocator keeps no state of its own: the addresses in use are those recorded in the
// checkpoint, which is written before an address is configured anywhere, so an address
// is never handed out twice, across restarts too.

// allocateAddress returns the lowest address of r that is neither excluded, nor in use, nor
// one of nodeAddrs, with r's prefix length.
//
// nodeAddrs are the addresses the node itself holds, read by the caller at allocation
// time: the port netdev's own addresses and the kubelet's node IPs. They change while
// the plugin runs (DHCP, an admin's ip addr add), so they are not part of the pool's
// configuration; a pod handed one of them would take over the node's traffic on the
// segment.
func allocateAddress(r nodeconfig.Range, inUse map[netip.Addr]bool, nodeAddrs ...netip.Addr) (netip.Prefix, error) {
	held := make(map[netip.Addr]bool, len(nodeAddrs))
	for _, a := range nodeAddrs {
		// Netlink reports IPv4 addresses in either form; the range holds plain IPv4.
		held[a.Unmap()] = true
	}
	for a := r.Start; a.IsValid(); a = a.Next() {
		if !r.Exclude[a] && !inUse[a] && !held[a] {
			return netip.PrefixFrom(a, r.Subnet.Bits()), nil
		}
		if a == r.End {
			break
		}
	}
	return netip.Prefix{}, fmt.Errorf("address pool %s (%s to %s) has no free address", r.Name, r.Start, r.End)
}

// Package ipam hands out pod interface addresses from a node's address pools
// (nodeconfig.AddressPool). It keeps no state of its own: the addresses in use are those
// recorded in the plugin's checkpoint, which is written before an address is configured
// anywhere, so an address is never handed out twice, across restarts too.
package ipam

import (
	"fmt"
	"net/netip"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Allocate returns the lowest address of r that is neither excluded nor in use, with
// r's prefix length.
func Allocate(r nodeconfig.Range, inUse map[netip.Addr]bool) (netip.Prefix, error) {
	for a := r.Start; a.IsValid(); a = a.Next() {
		if !r.Exclude[a] && !inUse[a] {
			return netip.PrefixFrom(a, r.Subnet.Bits()), nil
		}
		if a == r.End {
			break
		}
	}
	return netip.Prefix{}, fmt.Errorf("address pool %s (%s to %s) has no free address", r.Name, r.Start, r.End)
}

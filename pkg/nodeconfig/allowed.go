package nodeconfig

import (
	"net/netip"
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// AllowedPoolFor is PoolFor among the pools whose names are in allowed only: the
// address pools a DeviceClass's allowedNetwork.addressPools grants. The first allowed
// pool that matches the node and the port serves it; a pool that is not allowed is
// passed over even when it matches first. Call it on a validated Config only.
func (c *Config) AllowedPoolFor(node string, p *discovery.Port, allowed []string) (Range, bool) {
	for i := range c.Network.AddressPools {
		pool := &c.Network.AddressPools[i]
		if !slices.Contains(allowed, pool.Name) || !matchPattern(pool.Nodes, node) || !pool.Selector.Matches(p) {
			continue
		}
		r, errs := pool.parse(nil, i)
		return r, len(errs) == 0
	}
	return Range{}, false
}

// PoolNames returns the names of the address pools, in order.
func (c *Config) PoolNames() []string {
	names := make([]string, len(c.Network.AddressPools))
	for i, p := range c.Network.AddressPools {
		names[i] = p.Name
	}
	return names
}

// PoolContaining returns the name of an address pool, of any node, whose range holds a:
// such an address is the pools' to hand out, never a static address of a claim. Call it
// on a validated Config only.
func (c *Config) PoolContaining(a netip.Addr) (string, bool) {
	for i := range c.Network.AddressPools {
		pool := &c.Network.AddressPools[i]
		r, errs := pool.parse(nil, i)
		if len(errs) == 0 && r.Start.Compare(a) <= 0 && a.Compare(r.End) <= 0 {
			return pool.Name, true
		}
	}
	return "", false
}

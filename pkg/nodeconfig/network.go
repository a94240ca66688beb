package nodeconfig

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// NetworkConfig is the node's part of network attachment (docs/network-attachment.md):
// where pod addresses come from for claims whose RdmaConfig says `ipam: node`.
type NetworkConfig struct {
	// AddressPools are ranges of pod addresses, each for the ports its selector matches.
	// The first pool that matches a port serves it. Pools of different nodes must not
	// overlap: each node hands out its own range, so that no external IPAM service is
	// needed and two pods never get one address.
	AddressPools []AddressPool `json:"addressPools,omitempty"`
}

// AddressPool is one range of addresses for pod interfaces.
type AddressPool struct {
	// Name names the pool in logs and errors; default pool<index>.
	Name string `json:"name,omitempty"`
	// Nodes are the node names or shell patterns (gpu-a-*) the pool applies to; empty:
	// every node. The chart gives every node the same configuration, so pools for a
	// shared L2 segment are written one per node (or node group) with disjoint ranges.
	Nodes []string `json:"nodes,omitempty"`
	// Selector picks the ports whose pods take addresses from this pool; empty: all.
	Selector Selector `json:"selector,omitempty"`
	// Subnet is the prefix of the pod interfaces, e.g. 192.168.77.0/24; pod addresses
	// get its prefix length.
	Subnet string `json:"subnet"`
	// RangeStart and RangeEnd bound the addresses handed out (inclusive). RangeStart
	// defaults to the second host address of Subnet, since the first is by convention
	// the segment's gateway; an explicit RangeStart (the first host address too) is
	// honoured. RangeEnd defaults to the last host address.
	RangeStart string `json:"rangeStart,omitempty"`
	RangeEnd   string `json:"rangeEnd,omitempty"`
	// Exclude lists addresses inside the range that are never handed out, such as a
	// gateway or another host's address. The node's own addresses need not be listed:
	// the allocator is told them at allocation time (podnet's allocator).
	Exclude []string `json:"exclude,omitempty"`
}

// maxPoolAddresses bounds the size of one pool's range, so that a scan for a free
// address stays cheap: far more than pods on one node.
const maxPoolAddresses = 1 << 16

// Range is a validated address pool.
type Range struct {
	Name    string
	Subnet  netip.Prefix
	Start   netip.Addr
	End     netip.Addr
	Exclude map[netip.Addr]bool
	nodes   []string
}

// PoolFor returns the validated address pool that serves port p on node, and false
// when none does. Call it on a validated Config only.
func (c *Config) PoolFor(node string, p *discovery.Port) (Range, bool) {
	for i := range c.Network.AddressPools {
		pool := &c.Network.AddressPools[i]
		if matchPattern(pool.Nodes, node) && pool.Selector.Matches(p) {
			r, errs := pool.parse(nil, i)
			return r, len(errs) == 0
		}
	}
	return Range{}, false
}

func (c *Config) setNetworkDefaults() {
	for i := range c.Network.AddressPools {
		pool := &c.Network.AddressPools[i]
		if pool.Name == "" {
			pool.Name = fmt.Sprintf("pool%d", i)
		}
		pool.Selector.normalize()
	}
}

func (c *Config) validateNetwork() field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("network", "addressPools")
	var ranges []Range
	for i := range c.Network.AddressPools {
		pool := &c.Network.AddressPools[i]
		p := path.Index(i)
		errs = append(errs, pool.Selector.validate(p.Child("selector"))...)
		for j, n := range pool.Nodes {
			if n == "" {
				// It would match no node: the pool would silently serve nothing.
				errs = append(errs, field.Required(p.Child("nodes").Index(j), "a node name or shell pattern; leave nodes out for every node"))
				continue
			}
			if msg := selectorcheck.Pattern(n); msg != "" {
				errs = append(errs, field.Invalid(p.Child("nodes").Index(j), n, msg))
			}
		}
		r, perrs := pool.parse(p, i)
		errs = append(errs, perrs...)
		if len(perrs) > 0 {
			continue
		}
		for _, o := range ranges {
			// Pools of different nodes may reuse a range only if their node lists
			// differ; overlapping pools of one node would hand out one address twice.
			if r.Start.Compare(o.End) <= 0 && o.Start.Compare(r.End) <= 0 && slices.Equal(pool.Nodes, o.nodes) {
				errs = append(errs, field.Invalid(p, pool.Name, fmt.Sprintf("its range overlaps the range of pool %s", o.Name)))
			}
		}
		r.nodes = pool.Nodes
		ranges = append(ranges, r)
	}
	return errs
}

// parse checks one pool and returns its range; fldPath may be nil.
func (a *AddressPool) parse(fldPath *field.Path, index int) (Range, field.ErrorList) {
	var errs field.ErrorList
	r := Range{Name: a.Name, Exclude: map[netip.Addr]bool{}}
	if r.Name == "" {
		r.Name = fmt.Sprintf("pool%d", index)
	}
	subnet, err := netip.ParsePrefix(a.Subnet)
	if err != nil || subnet != subnet.Masked() || subnet.Addr().Zone() != "" {
		return r, append(errs, field.Invalid(fldPath.Child("subnet"), a.Subnet, "must be a prefix such as 192.168.77.0/24 or fd00:77::/64"))
	}
	r.Subnet = subnet
	first, last := hostBounds(subnet)
	r.Start, r.End = first, last
	if first != last {
		// The first host address is the gateway on most segments: a pod that took it
		// would answer for the router. Only an explicit rangeStart hands it out.
		r.Start = first.Next()
	}
	parseIn := func(s, name string) (netip.Addr, bool) {
		addr, err := netip.ParseAddr(s)
		if err != nil || !subnet.Contains(addr) {
			errs = append(errs, field.Invalid(fldPath.Child(name), s, "must be an address in "+subnet.String()))
			return netip.Addr{}, false
		}
		return addr, true
	}
	if a.RangeStart != "" {
		if v, ok := parseIn(a.RangeStart, "rangeStart"); ok {
			r.Start = v
		}
	}
	if a.RangeEnd != "" {
		if v, ok := parseIn(a.RangeEnd, "rangeEnd"); ok {
			r.End = v
		}
	}
	for j, s := range a.Exclude {
		if v, ok := parseIn(s, fmt.Sprintf("exclude[%d]", j)); ok {
			r.Exclude[v] = true
		}
	}
	if len(errs) > 0 {
		return r, errs
	}
	if a.RangeEnd == "" && size(r.Start, r.End) > maxPoolAddresses {
		// A large subnet (an IPv6 /64) without a range end: the first addresses do.
		r.End = advance(r.Start, maxPoolAddresses-1)
	}
	if r.Start.Compare(r.End) > 0 {
		errs = append(errs, field.Invalid(fldPath.Child("rangeEnd"), r.End.String(), "must not be before rangeStart "+r.Start.String()))
	} else if size(r.Start, r.End) > maxPoolAddresses {
		errs = append(errs, field.Invalid(fldPath.Child("rangeEnd"), r.End.String(), fmt.Sprintf("the range may hold at most %d addresses", maxPoolAddresses)))
	}
	return r, errs
}

// hostBounds returns the first and last address of subnet that can be given to a host:
// for IPv4 without the network and broadcast addresses (where the prefix leaves any),
// for IPv6 without the subnet-router anycast address.
func hostBounds(p netip.Prefix) (netip.Addr, netip.Addr) {
	first := p.Addr()
	last := lastAddr(p)
	if p.Addr().Is4() && p.Bits() >= 31 {
		return first, last
	}
	if p.Addr().Is4() {
		return first.Next(), last.Prev()
	}
	return first.Next(), last
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	for i := range b {
		bit := i * 8
		switch {
		case bit >= p.Bits():
			b[i] = 0xff
		case bit+8 > p.Bits():
			b[i] |= 0xff >> (p.Bits() - bit)
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// size returns the number of addresses from a to b (inclusive), capped above
// maxPoolAddresses.
func size(a, b netip.Addr) int {
	n := new(big.Int).Sub(toBig(b), toBig(a))
	n.Add(n, big.NewInt(1))
	if !n.IsInt64() || n.Int64() > maxPoolAddresses {
		return maxPoolAddresses + 1
	}
	return int(n.Int64())
}

// advance returns the address n after a.
func advance(a netip.Addr, n int64) netip.Addr {
	v := new(big.Int).Add(toBig(a), big.NewInt(n))
	b := v.FillBytes(make([]byte, 16))
	out := netip.AddrFrom16([16]byte(b))
	if a.Is4() {
		return out.Unmap()
	}
	return out
}

func toBig(a netip.Addr) *big.Int {
	b := a.As16()
	return new(big.Int).SetBytes(b[:])
}

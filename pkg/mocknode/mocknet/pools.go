package mocknet

import (
	"net/netip"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Pod address ranges of the local cluster's address pools (`ipam: node`): inside each
// RoCE netdev's /24, hosts .100 to .199, so the host's own address (.11 on dgx-h100) and
// the rest of the subnet stay out; the IPoIB stand-ins, which have no address in the
// tree, share IPoIBSubnet.
const (
	poolFirstHost = 100
	poolLastHost  = 199
	// IPoIBSubnet is the subnet of pod interfaces on the IPoIB stand-ins.
	IPoIBSubnet = "10.201.0.0/24"
	// IPoIBPool names the pool of the IPoIB stand-ins.
	IPoIBPool = "ipoib"
)

// AddressPools returns the node configuration's address pools for the stand-ins of a
// record: one per RoCE netdev (or bond) with an IPv4 address, selected by the netdev's
// name, and one for all IPoIB interfaces. The e2e suite reads them back from the values
// file the cluster tool writes, so this is the one place they are made.
func AddressPools(rec *Plan) []nodeconfig.AddressPool {
	var pools []nodeconfig.AddressPool
	var ipoib []string
	for _, l := range rec.Links {
		switch l.Role {
		case RoleRoCE, RoleBond:
			for _, a := range l.Addresses {
				if !a.Addr().Is4() || a.Bits() != ipv4Bits {
					continue
				}
				subnet := a.Masked()
				pools = append(pools, nodeconfig.AddressPool{
					Name:       l.Name,
					Selector:   nodeconfig.Selector{IfNames: []string{l.Name}},
					Subnet:     subnet.String(),
					RangeStart: hostIn(subnet, poolFirstHost).String(),
					RangeEnd:   hostIn(subnet, poolLastHost).String(),
					Exclude:    []string{a.Addr().String()},
				})
				break // one pool per netdev
			}
		case RoleIPoIB:
			ipoib = append(ipoib, l.Name)
		}
	}
	if len(ipoib) > 0 {
		subnet := netip.MustParsePrefix(IPoIBSubnet)
		pools = append(pools, nodeconfig.AddressPool{
			Name:       IPoIBPool,
			Selector:   nodeconfig.Selector{IfNames: ipoib},
			Subnet:     subnet.String(),
			RangeStart: hostIn(subnet, poolFirstHost).String(),
			RangeEnd:   hostIn(subnet, poolLastHost).String(),
		})
	}
	return pools
}

// hostIn returns the address n of an IPv4 /24.
func hostIn(p netip.Prefix, n int) netip.Addr {
	b := p.Masked().Addr().As4()
	b[3] = byte(n)
	return netip.AddrFrom4(b)
}

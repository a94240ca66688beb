package mocknode

import (
	"sort"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/internal/natsort"
)

// ExpectedPort is what discovery should report for one port of a mock node, derived from
// the description (not from the written tree) by the rules of sysfs.md. Tests of
// discovery, the device model and the plugin compare against it, so that a profile change
// cannot silently change what they check.
//
// Pointers are nil where the fact is unknown or does not apply, as in the inventory.
type ExpectedPort struct {
	IBDev     string
	Port      int
	LinkLayer string
	State     string
	PhysState string
	SpeedGbps *int
	Rate      string

	// Netdev is the bond master for LAG and bonded ports, the IPoIB interface (dev_port =
	// port-1) for InfiniBand, the parent for virtual devices; empty if none.
	Netdev   string
	MTU      *int
	GIDIndex *int

	NodeGUID string
	FWVer    string
	BoardID  string
	HCAType  string

	// VendorID and DeviceID are four lower-case hex digits without 0x.
	VendorID string
	DeviceID string
	Driver   string
	PCIBusID string
	PCIeRoot string
	NUMANode *int
	SRIOVVF  bool
	PhysFn   string
	LAG      bool
	Virtual  bool

	Verbs *CharDev
	UMAD  *CharDev
	ISSM  *CharDev
}

// ExpectedPorts lists every port of the node as discovery should see it, sorted by ibdev
// name (natural order, natsort) and port number. n must be valid.
func (n *Node) ExpectedPorts() []ExpectedPort {
	p := newPaths(n)
	chardevs := map[string]*CharDev{}
	for _, c := range n.CharDevs() {
		chardevs[c.IBDev+"/"+string(c.Kind)+"/"+strconv.Itoa(c.Port)] = &c
	}
	var out []ExpectedPort
	for _, d := range n.RDMADevices {
		for _, port := range d.Ports {
			e := ExpectedPort{
				IBDev: d.Name, Port: port.Number, LinkLayer: port.LinkLayer, State: port.State,
				PhysState: port.PhysState, Rate: port.Rate, SpeedGbps: speed(port.Rate),
				NodeGUID: d.NodeGUID, FWVer: d.FWVer, BoardID: d.BoardID, HCAType: d.HCAType,
				Virtual: d.PCI == "",
				Verbs:   chardevs[d.Name+"/"+string(CharDevVerbs)+"/0"],
				UMAD:    chardevs[d.Name+"/"+string(CharDevUMAD)+"/"+strconv.Itoa(port.Number)],
				ISSM:    chardevs[d.Name+"/"+string(CharDevISSM)+"/"+strconv.Itoa(port.Number)],
			}
			if d.PCI != "" {
				f := p.fns[d.PCI]
				e.VendorID, e.DeviceID = hex4(f.Vendor), hex4(f.Device)
				e.Driver, e.PCIBusID, e.PhysFn, e.SRIOVVF = f.Driver, f.Address, f.PhysFn, f.PhysFn != ""
				e.PCIeRoot = strings.Split(p.function(f.Address), "/")[1]
				if f.NUMANode >= 0 {
					e.NUMANode = ptr(f.NUMANode)
				}
			}
			e.Netdev = n.expectedNetdev(&d, &port)
			if nd := p.nds[e.Netdev]; nd != nil {
				e.MTU = ptr(nd.MTU)
				e.LAG = nd.Bond || nd.Master != ""
			}
			if port.LinkLayer == "Ethernet" {
				e.GIDIndex = expectedGIDIndex(port.GIDs)
			}
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if c := natsort.Compare(out[i].IBDev, out[j].IBDev); c != 0 {
			return c < 0
		}
		return out[i].Port < out[j].Port
	})
	return out
}

func (n *Node) expectedNetdev(d *RDMADevice, port *Port) string {
	if d.PCI == "" {
		return d.Parent
	}
	if port.LinkLayer == "InfiniBand" {
		for _, nd := range n.Netdevs {
			if nd.PCI == d.PCI && nd.SubDir == "" && nd.DevPort == port.Number-1 {
				return nd.Name
			}
		}
		return ""
	}
	best := -1
	name := ""
	for _, g := range port.GIDs {
		if g.Ndev != "" && (best < 0 || g.Index < best) {
			best, name = g.Index, g.Ndev
		}
	}
	return name
}

// expectedGIDIndex is sysfs.md's rule: the lowest RoCE v2 IPv4-mapped entry, else the
// lowest RoCE v2 global IPv6 entry, else none.
func expectedGIDIndex(gids []GID) *int {
	v4, v6 := -1, -1
	for _, g := range gids {
		if g.Type != GIDTypeRoCEv2 {
			continue
		}
		switch {
		case g.GID.Is4In6():
			if v4 < 0 || g.Index < v4 {
				v4 = g.Index
			}
		case g.GID.IsGlobalUnicast():
			if v6 < 0 || g.Index < v6 {
				v6 = g.Index
			}
		}
	}
	switch {
	case v4 >= 0:
		return ptr(v4)
	case v6 >= 0:
		return ptr(v6)
	}
	return nil
}

// speed is the whole number of Gb/s before "Gb/sec" (2.5 is 2).
func speed(rate string) *int {
	num, _, ok := strings.Cut(rate, " ")
	if !ok {
		return nil
	}
	whole, _, _ := strings.Cut(num, ".")
	v, err := strconv.Atoi(whole)
	if err != nil {
		return nil
	}
	return &v
}

func hex4(v uint16) string {
	s := strconv.FormatUint(uint64(v), 16)
	return strings.Repeat("0", 4-len(s)) + s
}

func ptr[T any](v T) *T { return &v }

package mocknode

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// ExpectedPorts lists every port of the node as discovery should report it, derived from
// the description (not from the written tree) by the rules of sysfs.md, in the
// inventory's order (discovery.SortPorts). Tests of discovery, the device model, the CLI
// and the plugin compare against it, so that a profile change cannot silently change what
// they check.
//
// Every fact of discovery.Port is filled but Model, the marketing name that discovery
// looks up in its own table of PCI IDs: compare with that field ignored. Pointers are nil
// where the fact is unknown or does not apply, as in the inventory. n must be valid.
func (n *Node) ExpectedPorts() []discovery.Port {
	p := newPaths(n)
	chardevs := map[string]discovery.CharDev{}
	for _, c := range n.CharDevs() {
		chardevs[c.IBDev+"/"+string(c.Kind)+"/"+strconv.Itoa(c.Port)] = discovery.CharDev{Name: c.Name, Major: c.Major, Minor: c.Minor}
	}
	// Each port owns its devices, as in the inventory.
	charDev := func(ibdev string, kind CharDevKind, port int) *discovery.CharDev {
		if c, ok := chardevs[ibdev+"/"+string(kind)+"/"+strconv.Itoa(port)]; ok {
			return &c
		}
		return nil
	}
	var out []discovery.Port
	for _, d := range n.RDMADevices {
		for _, port := range d.Ports {
			e := discovery.Port{
				IBDev: d.Name, Port: port.Number, LinkLayer: port.LinkLayer, State: port.State,
				PhysState: port.PhysState, Rate: port.Rate, SpeedGbps: speed(port.Rate),
				PortGUID: portGUID(port.GIDs),
				NodeGUID: d.NodeGUID, FWVer: d.FWVer, BoardID: d.BoardID, HCAType: d.HCAType,
				Virtual: d.PCI == "",
				Verbs:   charDev(d.Name, CharDevVerbs, 0),
				UMAD:    charDev(d.Name, CharDevUMAD, port.Number),
				ISSM:    charDev(d.Name, CharDevISSM, port.Number),
			}
			if d.PCI != "" {
				f := p.fns[d.PCI]
				e.VendorID, e.DeviceID = hex4(f.Vendor), hex4(f.Device)
				e.Driver, e.PCIBusID, e.PhysFn, e.SRIOVVF = f.Driver, f.Address, f.PhysFn, f.PhysFn != ""
				e.PCIeRoot = strings.Split(p.function(f.Address), "/")[1]
				if f.NUMANode >= 0 {
					e.NUMANode = ptr(f.NUMANode)
				}
				if dd := n.expectedDataDirect(f); dd != nil {
					e.DataDirectBusID = dd.Address
					e.DataDirectPCIeRoot = strings.Split(p.function(dd.Address), "/")[1]
				}
				e.GPUDirect = n.expectedGPUDirect(f.Driver)
			}
			e.Netdev = n.expectedNetdev(&d, &port)
			if nd := p.nds[e.Netdev]; nd != nil {
				e.MTU = ptr(nd.MTU)
				e.NetdevOperState = nd.OperState
				e.LAG = nd.Bond || nd.Master != ""
			}
			switch port.LinkLayer {
			case discovery.LinkLayerEthernet:
				e.GIDIndex = expectedGIDIndex(port.GIDs)
			case discovery.LinkLayerInfiniBand:
				e.LID, e.SMLID = ptr(int(port.LID)), ptr(int(port.SMLID))
			}
			out = append(out, e)
		}
	}
	discovery.SortPorts(out)
	return out
}

// portGUID is what ibstat calls the port GUID: the interface ID (lower 64 bits) of GID 0
// in the node GUID notation; empty when GID 0 is unset.
func portGUID(gids []GID) string {
	for _, g := range gids {
		if g.Index == 0 && !g.GID.IsUnspecified() {
			b := g.GID.As16()
			return GUID(binary.BigEndian.Uint64(b[8:]))
		}
	}
	return ""
}

func (n *Node) expectedNetdev(d *RDMADevice, port *Port) string {
	if d.PCI == "" {
		return d.Parent
	}
	if port.LinkLayer == discovery.LinkLayerInfiniBand {
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

// expectedGIDIndex is sysfs.md's rule: the lowest RoCE v2 IPv4-mapped entry that is not
// link-local (169.254/16), else the lowest RoCE v2 global IPv6 entry, else none.
func expectedGIDIndex(gids []GID) *int {
	v4, v6 := -1, -1
	for _, g := range gids {
		if g.Type != GIDTypeRoCEv2 {
			continue
		}
		switch {
		case g.GID.Is4In6():
			if g.GID.Unmap().IsLinkLocalUnicast() {
				continue
			}
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

// expectedDataDirect is sysfs.md's pairing, restated: a ConnectX-8 or -9 PF with a VPD
// UUID (V3) has the Data Direct function (15b3:2100, bound to a driver other than
// vfio-pci) whose VPD has the same UUID, if exactly one has; VFs have none.
func (n *Node) expectedDataDirect(f *PCIFunction) *PCIFunction {
	if f.PhysFn != "" || f.Vendor != vendorMellanox || f.Device != deviceConnectX8 && f.Device != deviceConnectX9 || f.VPD == nil || f.VPD.UUID == "" {
		return nil
	}
	var match []*PCIFunction
	for i := range n.PCIFunctions {
		d := &n.PCIFunctions[i]
		if d.Vendor == vendorMellanox && d.Device == deviceDataDirect && d.Driver != "" && d.Driver != "vfio-pci" &&
			d.VPD != nil && d.VPD.UUID == f.VPD.UUID {
			match = append(match, d)
		}
	}
	if len(match) != 1 {
		return nil
	}
	return match[0]
}

// expectedGPUDirect is sysfs.md's GPUDirect rule, restated, for a port of a PCI
// function bound to drv: no NVIDIA driver, none; its open kernel modules (a taint
// without P) and an mlx5 port, dmabuf; else nvidia_peermem and an mlx5 port, peermem.
func (n *Node) expectedGPUDirect(drv string) string {
	mods := map[string]KernelModule{}
	for _, m := range n.KernelModules {
		mods[m.Name] = m
	}
	nv, loaded := mods["nvidia"]
	_, peermem := mods["nvidia_peermem"]
	switch {
	case !loaded || drv != "mlx5_core":
		return ""
	case !strings.Contains(nv.Taint, "P"):
		return discovery.GPUDirectDMABuf
	case peermem:
		return discovery.GPUDirectPeermem
	}
	return ""
}

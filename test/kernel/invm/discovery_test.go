//go:build kernelvm

package invm

import (
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/test/kernel/rdmacore"
)

// devinfo is what ibv_devinfo -v says of the node: all the waits need, and the cheapest
// of the tools to run.
type devinfo []rdmacore.Device

func readDevinfo(t *testing.T) devinfo {
	t.Helper()
	devs, err := rdmacore.ParseDevinfo(run(t, "ibv_devinfo", "-v"))
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

// port finds a port of a device.
func (d devinfo) port(ibdev string, port int) (*rdmacore.Device, *rdmacore.Port) {
	for i := range d {
		if d[i].Name != ibdev {
			continue
		}
		for j := range d[i].Ports {
			if d[i].Ports[j].Number == port {
				return &d[i], &d[i].Ports[j]
			}
		}
	}
	return nil, nil
}

// rdmaCoreView is everything rdma-core and iproute2 say about the node at one moment.
type rdmaCoreView struct {
	devinfo
	links []rdmacore.Link
	devs  []rdmacore.Dev
	// netdevs maps a netdev name to what `ip -j link` says of it.
	netdevs map[string]ipLink
}

// ipLink is the part of `ip -j -d link show` compared with the driver.
type ipLink struct {
	Name      string `json:"ifname"`
	MTU       int    `json:"mtu"`
	OperState string `json:"operstate"`
	// Master is the bond (or bridge) the netdev is enslaved to; Kind its own link kind.
	Master   string `json:"master"`
	LinkInfo struct {
		Kind string `json:"info_kind"`
	} `json:"linkinfo"`
}

func readRdmaCore(t *testing.T) rdmaCoreView {
	t.Helper()
	v := rdmaCoreView{devinfo: readDevinfo(t), netdevs: map[string]ipLink{}}
	runJSON(t, &v.links, "rdma", "-j", "link", "show")
	runJSON(t, &v.devs, "rdma", "-j", "dev", "show")
	var links []ipLink
	runJSON(t, &links, "ip", "-j", "-d", "link", "show")
	for _, l := range links {
		v.netdevs[l.Name] = l
	}
	return v
}

// discoverCLI runs the driver's CLI on the live sysfs, as an operator would.
func discoverCLI(t *testing.T) *discovery.Inventory {
	t.Helper()
	inv, err := discovery.UnmarshalInventory([]byte(run(t, "rdma-dra", "discover", "-o", "json")))
	if err != nil {
		t.Fatal(err)
	}
	return inv
}

// TestDiscoveryMatchesRdmaCore holds rdma-dra discover -o json against rdma-core's and
// iproute2's view of two soft-RoCE devices, field by field, through address and link
// changes. Every field the driver publishes for a RoCE port is compared; what rdma-core
// cannot tell for rxe (PCI placement) is checked to be absent, as for any virtual device.
func TestDiscoveryMatchesRdmaCore(t *testing.T) {
	r0 := newRoCE(t, "rxe0", "veth0", "veth0p")
	r1 := newRoCE(t, "rxe1", "veth1", "veth1p")

	v4 := netip.MustParseAddr("192.168.77.10")
	v6 := netip.MustParseAddr("fd00:77::10")
	v6only := netip.MustParseAddr("fd00:78::10")

	// phase is one state of the node: what to change, and what rdma-core must show before
	// the driver is asked (the kernel applies changes from work queues).
	type phase struct {
		name   string
		change [][]string
		// gids: the global addresses each device's table must hold (and no other).
		gids map[string][]netip.Addr
		// state: the port state each device must be in.
		state map[string]string
	}
	phases := []phase{{
		name: "IPv4 and IPv6 on rxe0, IPv6 only on rxe1",
		change: [][]string{
			{"ip", "addr", "add", v4.String() + "/24", "dev", r0.Netdev},
			{"ip", "addr", "add", v6.String() + "/64", "dev", r0.Netdev, "nodad"},
			{"ip", "addr", "add", v6only.String() + "/64", "dev", r1.Netdev, "nodad"},
		},
		gids:  map[string][]netip.Addr{"rxe0": {v4, v6}, "rxe1": {v6only}},
		state: map[string]string{"rxe0": "ACTIVE", "rxe1": "ACTIVE"},
	}, {
		name:   "IPv4 removed from rxe0",
		change: [][]string{{"ip", "addr", "del", v4.String() + "/24", "dev", r0.Netdev}},
		gids:   map[string][]netip.Addr{"rxe0": {v6}, "rxe1": {v6only}},
		state:  map[string]string{"rxe0": "ACTIVE", "rxe1": "ACTIVE"},
	}, {
		name:   "no global address on rxe0",
		change: [][]string{{"ip", "addr", "del", v6.String() + "/64", "dev", r0.Netdev}},
		gids:   map[string][]netip.Addr{"rxe0": {}, "rxe1": {v6only}},
		state:  map[string]string{"rxe0": "ACTIVE", "rxe1": "ACTIVE"},
	}, {
		name:   "rxe1's netdev down",
		change: [][]string{{"ip", "link", "set", r1.Netdev, "down"}},
		gids:   map[string][]netip.Addr{"rxe0": {}},
		state:  map[string]string{"rxe0": "ACTIVE", "rxe1": "DOWN"},
	}, {
		name:   "rxe0's peer down (no carrier)",
		change: [][]string{{"ip", "link", "set", r0.Peer, "down"}},
		state:  map[string]string{"rxe0": "DOWN", "rxe1": "DOWN"},
	}, {
		name: "both up again, IPv4 back on rxe0",
		change: [][]string{
			{"ip", "link", "set", r0.Peer, "up"},
			{"ip", "link", "set", r1.Netdev, "up"},
			{"ip", "addr", "add", v4.String() + "/24", "dev", r0.Netdev},
			// The kernel drops a netdev's IPv6 addresses when it goes down.
			{"ip", "addr", "add", v6only.String() + "/64", "dev", r1.Netdev, "nodad"},
		},
		gids:  map[string][]netip.Addr{"rxe0": {v4}, "rxe1": {v6only}},
		state: map[string]string{"rxe0": "ACTIVE", "rxe1": "ACTIVE"},
	}}

	for _, ph := range phases {
		t.Run(ph.name, func(t *testing.T) {
			for _, c := range ph.change {
				run(t, c[0], c[1:]...)
			}
			eventually(t, "rdma-core shows the change", func() (bool, string) {
				v := readDevinfo(t)
				for ibdev, want := range ph.state {
					_, p := v.port(ibdev, 1)
					if p == nil {
						return false, ibdev + " not listed by ibv_devinfo"
					}
					if got := rdmacore.StateNames[p.State]; got != want {
						return false, fmt.Sprintf("%s is %s, waiting for %s", ibdev, got, want)
					}
				}
				for ibdev, want := range ph.gids {
					_, p := v.port(ibdev, 1)
					var got []netip.Addr
					for _, g := range p.GIDs {
						if !g.Addr.IsLinkLocalUnicast() {
							got = append(got, g.Addr.Unmap())
						}
					}
					slices.SortFunc(got, netip.Addr.Compare)
					w := slices.Clone(want)
					slices.SortFunc(w, netip.Addr.Compare)
					if !slices.Equal(got, w) {
						return false, fmt.Sprintf("%s has global GIDs %v, waiting for %v", ibdev, got, w)
					}
				}
				return true, ""
			})
			before := readRdmaCore(t)
			inv := discoverCLI(t)
			after := readRdmaCore(t)
			// A change between the two readings would make the comparison meaningless.
			if fmt.Sprint(before) != fmt.Sprint(after) {
				t.Fatalf("the node changed while the driver read it:\nbefore %+v\nafter  %+v", before, after)
			}
			compareInventory(t, inv, before)
		})
	}
}

// compareInventory checks every field of every port of inv against rdma-core's view.
func compareInventory(t *testing.T, inv *discovery.Inventory, v rdmaCoreView) {
	t.Helper()
	var want, got []string
	for _, d := range v.devinfo {
		for _, p := range d.Ports {
			want = append(want, fmt.Sprintf("%s/%d", d.Name, p.Number))
		}
	}
	for _, p := range inv.Ports {
		got = append(got, fmt.Sprintf("%s/%d", p.IBDev, p.Port))
	}
	if !slices.Equal(want, got) {
		t.Fatalf("ports: driver %v, ibv_devinfo %v", got, want)
	}
	if mode := run(t, "rdma", "system", "show"); !strings.Contains(mode, "netns "+string(inv.NetnsMode)+" ") {
		t.Errorf("netns_mode: driver %q, rdma system show %q", inv.NetnsMode, strings.TrimSpace(mode))
	}
	uverbs := map[string]string{}
	for i := range inv.Ports {
		p := &inv.Ports[i]
		dev, port := v.port(p.IBDev, p.Port)
		link := findLink(v.links, p.IBDev, p.Port)
		rdev := findDev(v.devs, p.IBDev)
		if link == nil || rdev == nil {
			t.Fatalf("%s/%d: not listed by rdma link (%v) or rdma dev (%v)", p.IBDev, p.Port, link != nil, rdev != nil)
		}
		check := func(field string, driver, theirs any, source string) {
			t.Helper()
			if fmt.Sprint(driver) != fmt.Sprint(theirs) {
				t.Errorf("%s/%d %s: driver %v, %s %v", p.IBDev, p.Port, field, driver, source, theirs)
			}
		}
		check("link_layer", p.LinkLayer, port.LinkLayer, "ibv_devinfo")
		check("port_state", p.State, rdmacore.StateNames[port.State], "ibv_devinfo "+port.StateName)
		check("phys_state", p.PhysState, rdmacore.PhysStateNames[port.PhysState], "ibv_devinfo "+port.PhysStateName)
		check("phys_state", strings.ToUpper(p.PhysState), strings.ReplaceAll(link.PhysicalState, "_", ""), "rdma link")
		check("port_state", p.State, link.State, "rdma link")
		// The driver publishes whole Gb/s of the rate (2.5 is 2).
		check("speed_gbps", deref(p.SpeedGbps), int(math.Floor(float64(port.Width)*port.LaneGbps)), fmt.Sprintf("ibv_devinfo %dX at %g Gb/s per lane", port.Width, port.LaneGbps))
		lanes := fmt.Sprintf("%dX", port.Width)
		if !strings.HasPrefix(p.Rate, fmt.Sprint(deref(p.SpeedGbps))+" Gb/sec ("+lanes+" ") {
			t.Errorf("%s/%d rate: driver %q, ibv_devinfo %s at %g Gb/s per lane", p.IBDev, p.Port, p.Rate, lanes, port.LaneGbps)
		}
		check("board_id", p.BoardID, dev.BoardID, "ibv_devinfo")
		check("netdev", p.Netdev, link.Netdev, "rdma link")
		nd, ok := v.netdevs[link.Netdev]
		if !ok && link.Netdev != "" {
			t.Errorf("%s/%d: netdev %q not listed by ip link", p.IBDev, p.Port, link.Netdev)
		}
		if link.Netdev != "" {
			// A LAG port's netdev is a bond, or a bond's slave (whose GIDs the bond has).
			check("lag", p.LAG, nd.LinkInfo.Kind == "bond" || v.netdevs[nd.Master].LinkInfo.Kind == "bond", "ip -d link kind "+nd.LinkInfo.Kind+", master "+nd.Master)
			check("mtu", deref(p.MTU), nd.MTU, "ip link")
			check("netdev_operstate", p.NetdevOperState, strings.ToLower(nd.OperState), "ip link")
		}
		if p.LinkLayer == discovery.LinkLayerInfiniBand {
			check("lid", deref(p.LID), port.LID, "ibv_devinfo")
			check("sm_lid", deref(p.SMLID), port.SMLID, "ibv_devinfo")
		} else {
			// RoCE ports have no LID: the driver leaves LIDs out, the verbs report 0.
			check("lid", p.LID == nil && p.SMLID == nil, port.LID == 0 && port.SMLID == 0, "ibv_devinfo lid 0")
		}
		check("node_guid", p.NodeGUID, dev.NodeGUID, "ibv_devinfo")
		check("node_guid", p.NodeGUID, rdev.NodeGUID, "rdma dev")
		// rxe has no firmware: the verbs say 0.0.0, sysfs has no fw_ver file, the driver
		// publishes none.
		fw := dev.FWVer
		if fw == "0.0.0" {
			fw = ""
		}
		check("fw_ver", p.FWVer, fw, "ibv_devinfo "+dev.FWVer)
		if len(port.GIDs) > 0 && port.GIDs[0].Index == 0 {
			check("port_guid", p.PortGUID, interfaceID(port.GIDs[0].Addr), "ibv_devinfo GID[0] "+port.GIDs[0].Addr.String())
		} else {
			check("port_guid", p.PortGUID, "", "ibv_devinfo without GID[0]")
		}
		wantIdx := rdmacore.RoCEv2GIDIndex(port.GIDs)
		gotIdx := -1
		if p.GIDIndex != nil {
			gotIdx = *p.GIDIndex
		}
		check("gid_index", gotIdx, wantIdx, fmt.Sprintf("the rule on ibv_devinfo's table %v", port.GIDs))
		// rxe's verbs vendor_id is 0xffffff, which no PCI vendor has (those are 16 bits;
		// the verbs' vendor_id of hardware is its IEEE OUI, e.g. 0x02c9, not the PCI ID).
		if dev.VendorID == "0xffffff" {
			check("virtual", p.Virtual, true, "ibv_devinfo vendor_id "+dev.VendorID)
		}
		if p.Virtual {
			check("pci", p.PCIBusID+p.PCIeRoot+p.VendorID+p.DeviceID+p.Driver+p.PhysFn, "", "no PCI function")
			check("sriov_vf", p.SRIOVVF, false, "no PCI function")
			// A virtual device's model follows its node type: a CA is soft-RoCE, an RNIC soft-iWARP.
			model := map[string]string{"ca": discovery.ModelSoftRoCE, "rnic": discovery.ModelSoftIWARP}[rdev.NodeType]
			check("model", p.Model, model, "rdma dev node_type "+rdev.NodeType)
			check("numa_node", p.NUMANode == nil, true, "no PCI function")
		} else {
			check("pci_bus_id present", p.PCIBusID != "", true, "a device with a PCI function")
		}
		compareGIDTable(t, p, port, link.Netdev)
		for _, cd := range []*discovery.CharDev{p.Verbs, p.UMAD, p.ISSM} {
			if cd != nil {
				compareCharDev(t, p, cd)
			}
		}
		if p.Verbs == nil {
			t.Errorf("%s/%d: no uverbs device", p.IBDev, p.Port)
		} else if other, dup := uverbs[p.Verbs.Name]; dup && other != p.IBDev {
			t.Errorf("%s and %s both have %s", other, p.IBDev, p.Verbs.Name)
		} else {
			uverbs[p.Verbs.Name] = p.IBDev
		}
	}
	// Every uverbs node the kernel made belongs to a device the driver found.
	entries, err := os.ReadDir("/dev/infiniband")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "uverbs") && uverbs[e.Name()] == "" {
			t.Errorf("/dev/infiniband/%s belongs to no port the driver found", e.Name())
		}
	}
}

// compareGIDTable holds the driver's reading of a port's GID table (what rdma-dra
// discover --gids prints and the GID index is chosen from) against ibv_devinfo's.
func compareGIDTable(t *testing.T, p *discovery.Port, port *rdmacore.Port, netdev string) {
	t.Helper()
	table, err := discovery.ReadGIDTable("/sys", p.IBDev, p.Port)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	ib := p.LinkLayer == discovery.LinkLayerInfiniBand
	for _, e := range table.Entries {
		// sysfs says "IB/RoCE v1" where the verbs say "RoCE v1" on Ethernet; on
		// InfiniBand there are neither types nor netdevs to compare.
		typ, nd := strings.TrimPrefix(string(e.Type), "IB/"), e.Netdev
		if ib {
			typ, nd = "", ""
		}
		got = append(got, fmt.Sprintf("%d %s %s %s", e.Index, e.GID.Addr(), typ, nd))
	}
	for _, g := range port.GIDs {
		typ, nd := g.Type, netdev
		if ib {
			typ, nd = "", ""
		}
		want = append(want, fmt.Sprintf("%d %s %s %s", g.Index, g.Addr, typ, nd))
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s/%d GID table:\ndriver      %q\nibv_devinfo %q (netdev from rdma link)", p.IBDev, p.Port, got, want)
	}
}

// compareCharDev checks that the kernel's node (devtmpfs) has the driver's numbers.
func compareCharDev(t *testing.T, p *discovery.Port, cd *discovery.CharDev) {
	t.Helper()
	var st unix.Stat_t
	name := "/dev/infiniband/" + cd.Name
	if err := unix.Stat(name, &st); err != nil {
		t.Errorf("%s/%d: %v", p.IBDev, p.Port, err)
		return
	}
	if st.Mode&unix.S_IFMT != unix.S_IFCHR {
		t.Errorf("%s is not a character device", name)
	}
	if maj, mnr := unix.Major(st.Rdev), unix.Minor(st.Rdev); maj != cd.Major || mnr != cd.Minor {
		t.Errorf("%s/%d %s: driver %d:%d, the kernel's node %d:%d", p.IBDev, p.Port, cd.Name, cd.Major, cd.Minor, maj, mnr)
	}
}

// interfaceID is the last 8 bytes of a GID in the node_guid notation (xxxx:xxxx:xxxx:xxxx).
func interfaceID(a netip.Addr) string {
	b := a.As16()
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15])
}

func findLink(links []rdmacore.Link, ibdev string, port int) *rdmacore.Link {
	for i := range links {
		if links[i].IBDev == ibdev && links[i].Port == port {
			return &links[i]
		}
	}
	return nil
}

func findDev(devs []rdmacore.Dev, ibdev string) *rdmacore.Dev {
	for i := range devs {
		if devs[i].IBDev == ibdev {
			return &devs[i]
		}
	}
	return nil
}

func deref[T any](p *T) any {
	if p == nil {
		return "<nil>"
	}
	return *p
}

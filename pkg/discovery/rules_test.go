package discovery_test

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// roceNode is a node with RoCE PFs 0000:5e:00.<i>, one RDMA device mlx5_<i> each, whose
// netdevs ens5f<i> are enslaved to bond when bond is set. gids builds each port's table.
func roceNode(count int, bond string, gids func(i int, ndev string) []mocknode.GID) *mocknode.Node {
	n := &mocknode.Node{}
	if bond != "" {
		n.Netdevs = append(n.Netdevs, mocknode.Netdev{Name: bond, Address: mocknode.MAC(0x0200000000ff), MTU: 9000, OperState: "up", Type: mocknode.NetdevTypeEthernet, Bond: true})
	}
	for i := 0; i < count; i++ {
		addr := "0000:5e:00." + string(rune('0'+i))
		ndev := "ens5f" + string(rune('0'+i))
		mac := uint64(0x020000000000 + i)
		n.PCIFunctions = append(n.PCIFunctions, mocknode.PCIFunction{Address: addr, Root: "pci0000:5d", Bridges: []string{"0000:5d:00.0"}, Vendor: 0x15b3, Device: 0x1021, Class: 0x020000, NUMANode: 0, Driver: "mlx5_core"})
		n.Netdevs = append(n.Netdevs, mocknode.Netdev{Name: ndev, PCI: addr, Address: mocknode.MAC(mac), MTU: 4200, OperState: "up", Type: mocknode.NetdevTypeEthernet, Master: bond})
		gidNdev := ndev
		if bond != "" {
			gidNdev = bond
		}
		n.RDMADevices = append(n.RDMADevices, mocknode.RDMADevice{
			Name: "mlx5_" + string(rune('0'+i)), PCI: addr, NodeGUID: mocknode.GUID(mocknode.MACToGUID(mac)), SysImageGUID: mocknode.GUID(mocknode.MACToGUID(mac)), FWVer: "28.1",
			Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "Ethernet", GIDTableSize: 256, GIDs: gids(i, gidNdev)}},
		})
	}
	return n
}

func TestRoCEPortRules(t *testing.T) {
	ll := func(i int) netip.Addr { return mocknode.LinkLocalGID(mocknode.MACToGUID(uint64(0x020000000000 + i))) }
	tests := []struct {
		name      string
		node      *mocknode.Node
		wantNdev  []string
		wantMTU   []int
		wantIndex []*int
		wantLAG   bool
	}{
		{
			name: "IPv4 at a sparse high index",
			node: roceNode(1, "", func(i int, nd string) []mocknode.GID {
				return []mocknode.GID{{Index: 0, GID: ll(i), Type: mocknode.GIDTypeRoCEv1, Ndev: nd}, {Index: 1, GID: ll(i), Type: mocknode.GIDTypeRoCEv2, Ndev: nd}, {Index: 131, GID: mocknode.IPv4GID("10.1.2.3"), Type: mocknode.GIDTypeRoCEv2, Ndev: nd}}
			}),
			wantNdev: []string{"ens5f0"}, wantMTU: []int{4200}, wantIndex: []*int{ptr(131)},
		},
		{
			name:     "IPv6 only",
			node:     roceNode(1, "", func(i int, nd string) []mocknode.GID { return mocknode.RoCEGIDs(nd, ll(i), "2001:db8::5") }),
			wantNdev: []string{"ens5f0"}, wantMTU: []int{4200}, wantIndex: []*int{ptr(3)},
		},
		{
			name:     "IPv6 then IPv4 prefers IPv4",
			node:     roceNode(1, "", func(i int, nd string) []mocknode.GID { return mocknode.RoCEGIDs(nd, ll(i), "2001:db8::5", "10.0.0.5") }),
			wantNdev: []string{"ens5f0"}, wantMTU: []int{4200}, wantIndex: []*int{ptr(5)},
		},
		{
			name:     "link-local only has no GID index",
			node:     roceNode(1, "", func(i int, nd string) []mocknode.GID { return mocknode.RoCEGIDs(nd, ll(i)) }),
			wantNdev: []string{"ens5f0"}, wantMTU: []int{4200}, wantIndex: []*int{nil},
		},
		{
			name:     "empty GID table falls back to the function's interface",
			node:     roceNode(1, "", func(int, string) []mocknode.GID { return nil }),
			wantNdev: []string{"ens5f0"}, wantMTU: []int{4200}, wantIndex: []*int{nil},
		},
		{
			name:     "two ports in one software bond",
			node:     roceNode(2, "bond1", func(i int, nd string) []mocknode.GID { return mocknode.RoCEGIDs(nd, ll(0), "10.9.0.1") }),
			wantNdev: []string{"bond1", "bond1"}, wantMTU: []int{9000, 9000}, wantIndex: []*int{ptr(3), ptr(3)}, wantLAG: true,
		},
		{
			name:     "bonded port without GIDs is its bond's",
			node:     roceNode(1, "bond1", func(int, string) []mocknode.GID { return nil }),
			wantNdev: []string{"bond1"}, wantMTU: []int{9000}, wantIndex: []*int{nil}, wantLAG: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := discover(t, writeNode(t, tt.node))
			if len(inv.Ports) != len(tt.wantNdev) {
				t.Fatalf("got %d ports, want %d", len(inv.Ports), len(tt.wantNdev))
			}
			for i, p := range inv.Ports {
				if p.Netdev != tt.wantNdev[i] || p.MTU == nil || *p.MTU != tt.wantMTU[i] || p.LAG != tt.wantLAG {
					t.Errorf("%s: netdev %q mtu %v lag %v; want %q %d %v", p.IBDev, p.Netdev, deref(p.MTU), p.LAG, tt.wantNdev[i], tt.wantMTU[i], tt.wantLAG)
				}
				if diff := cmp.Diff(tt.wantIndex[i], p.GIDIndex); diff != "" {
					t.Errorf("%s: GID index (-want +got):\n%s", p.IBDev, diff)
				}
			}
		})
	}
}

// TestGIDsOnSlave covers a table whose entries still name the enslaved interface: the
// port's netdev is its bond all the same.
func TestGIDsOnSlave(t *testing.T) {
	n := roceNode(1, "bond1", func(int, string) []mocknode.GID {
		return mocknode.RoCEGIDs("ens5f0", mocknode.LinkLocalGID(1), "10.0.0.9")
	})
	inv := discover(t, writeNode(t, n))
	if p := inv.Ports[0]; p.Netdev != "bond1" || !p.LAG || p.GIDIndex == nil || *p.GIDIndex != 3 {
		t.Errorf("port = netdev %q lag %v gid %v; want bond1, true, 3", p.Netdev, p.LAG, deref(p.GIDIndex))
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	// A dot import, as Go's review comments allow for tests that cannot be part of the
	// package they test: these build their nodes with mocknode, which imports discovery.
	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// Fixture GUIDs and MACs; every value in the expected inventories derives from these.
const (
	guidIB   = 0x7c8c0903_00c3cfee
	guidMlx4 = 0x0002c903_00a1b2c0
	macPF0   = 0xb83fd2000010
	macPF1   = 0xb83fd2000011
	macVF    = 0x02aabbcc0001
	macEth0  = 0x525400000001
)

// mixedNode has one shape of every rule: an InfiniBand port with IPoIB, a hardware LAG
// over two PFs, an SR-IOV VF with IPv6 only, a dual-port VPI adapter whose IPoIB names
// sort against their dev_port order, and a soft-RoCE device.
func mixedNode() *mocknode.Node {
	return &mocknode.Node{
		PCIFunctions: []mocknode.PCIFunction{
			{Address: "0000:03:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:01.0"}, Vendor: 0x15b3, Device: 0x1021, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0041, Class: 0x020700, NUMANode: 0, Driver: "mlx5_core"},
			{Address: "0000:04:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:02.0"}, Vendor: 0x15b3, Device: 0x101d, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0016, Class: 0x020000, NUMANode: -1, Driver: "mlx5_core"},
			{Address: "0000:04:00.1", Root: "pci0000:00", Bridges: []string{"0000:00:02.0"}, Vendor: 0x15b3, Device: 0x101d, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0016, Class: 0x020000, NUMANode: -1, Driver: "mlx5_core"},
			{Address: "0000:04:00.2", Vendor: 0x15b3, Device: 0x101e, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0016, Class: 0x020000, NUMANode: -1, Driver: "mlx5_core", PhysFn: "0000:04:00.0"},
			{Address: "0000:17:00.0", Root: "pci0000:16", Bridges: []string{"0000:16:02.0"}, Vendor: 0x15b3, Device: 0x1007, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0006, Class: 0x020700, NUMANode: 1, Driver: "mlx4_core"},
		},
		Netdevs: []mocknode.Netdev{
			{Name: "ibp3s0", PCI: "0000:03:00.0", Address: mocknode.IPoIBAddress(0x1049, guidIB), MTU: 4092, OperState: "up", Type: mocknode.NetdevTypeInfiniBand},
			{Name: "ens4f0np0", PCI: "0000:04:00.0", Address: mocknode.MAC(macPF0), MTU: 9000, OperState: "up", Type: mocknode.NetdevTypeEthernet, Master: "bond0"},
			{Name: "ens4f1np1", PCI: "0000:04:00.1", Address: mocknode.MAC(macPF1), MTU: 9000, OperState: "up", Type: mocknode.NetdevTypeEthernet, Master: "bond0"},
			{Name: "bond0", Address: mocknode.MAC(macPF0), MTU: 9000, OperState: "up", Type: mocknode.NetdevTypeEthernet, Bond: true},
			{Name: "ens4f0v0", PCI: "0000:04:00.2", Address: mocknode.MAC(macVF), MTU: 1500, OperState: "up", Type: mocknode.NetdevTypeEthernet},
			// dev_port 1 sorts first by name: the mapping must follow dev_port, not order.
			{Name: "ibs17a", PCI: "0000:17:00.0", Address: mocknode.IPoIBAddress(0x48, guidMlx4+2), MTU: 2044, OperState: "down", Type: mocknode.NetdevTypeInfiniBand, DevPort: 1},
			{Name: "ibs17b", PCI: "0000:17:00.0", Address: mocknode.IPoIBAddress(0x48, guidMlx4+1), MTU: 65520, OperState: "up", Type: mocknode.NetdevTypeInfiniBand, DevPort: 0},
			{Name: "eth0", Address: mocknode.MAC(macEth0), MTU: 1500, OperState: "up", Type: mocknode.NetdevTypeEthernet},
		},
		RDMADevices: []mocknode.RDMADevice{
			{Name: "mlx5_0", PCI: "0000:03:00.0", NodeGUID: mocknode.GUID(guidIB), SysImageGUID: mocknode.GUID(guidIB), FWVer: "28.44.2524", BoardID: "MT_0000000838", HCAType: "MT4129",
				Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand", LID: 0x538, SMLID: 1,
					GIDs: []mocknode.GID{{Index: 0, GID: mocknode.LinkLocalGID(guidIB), Type: mocknode.GIDTypeRoCEv1}}}}},
			{Name: "mlx5_bond_0", PCI: "0000:04:00.0", NodeGUID: mocknode.GUID(mocknode.MACToGUID(macPF0)), SysImageGUID: mocknode.GUID(mocknode.MACToGUID(macPF0)), FWVer: "22.39.1002", HCAType: "MT4125",
				Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "200 Gb/sec (4X HDR)", LinkLayer: "Ethernet",
					GIDs: mocknode.RoCEGIDs("bond0", mocknode.LinkLocalGID(mocknode.MACToGUID(macPF0)), "10.0.0.1")}}},
			{Name: "mlx5_2", PCI: "0000:04:00.2", NodeGUID: mocknode.GUID(mocknode.MACToGUID(macVF)), SysImageGUID: mocknode.GUID(mocknode.MACToGUID(macPF0)), FWVer: "22.39.1002", HCAType: "MT4125",
				Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "100 Gb/sec (2X HDR)", LinkLayer: "Ethernet",
					GIDs: mocknode.RoCEGIDs("ens4f0v0", mocknode.LinkLocalGID(mocknode.MACToGUID(macVF)), "2001:db8::2")}}},
			{Name: "mlx4_0", PCI: "0000:17:00.0", NodeGUID: mocknode.GUID(guidMlx4), SysImageGUID: mocknode.GUID(guidMlx4), FWVer: "2.42.5000", BoardID: "MT_1090120019", HCAType: "MT4103",
				Ports: []mocknode.Port{
					{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "56 Gb/sec (4X FDR)", LinkLayer: "InfiniBand", LID: 0x12, SMLID: 1},
					{Number: 2, State: "DOWN", PhysState: "Disabled", Rate: "10 Gb/sec (4X SDR)", LinkLayer: "InfiniBand"},
				}},
			{Name: "rxe0", Parent: "eth0", NodeGUID: mocknode.GUID(mocknode.MACToGUID(macEth0)), SysImageGUID: mocknode.GUID(mocknode.MACToGUID(macEth0)), FWVer: "0.0.0", NoMAD: true,
				Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "2.5 Gb/sec (1X SDR)", LinkLayer: "Ethernet",
					GIDs: mocknode.RoCEGIDs("eth0", mocknode.LinkLocalGID(mocknode.MACToGUID(macEth0)), "192.168.1.5")}}},
		},
	}
}

// writeNode lays n out in a fresh directory and returns its sysfs root.
func writeNode(t testing.TB, n *mocknode.Node) string {
	t.Helper()
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatalf("write mock node: %v", err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

// discover runs one scan of root with a fresh Discoverer.
func discover(t testing.TB, root string) *Inventory {
	t.Helper()
	inv, err := New(Options{SysfsRoot: root}).Discover(context.Background())
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return inv
}

// writeFile replaces a file of a written tree (following links, as the kernel would).
func writeFile(t testing.TB, root, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// remove deletes an entry of a written tree; name's last element is not followed.
func remove(t testing.TB, root, name string) {
	t.Helper()
	p := filepath.Join(root, name)
	real, err := filepath.EvalSymlinks(filepath.Dir(p))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(real, filepath.Base(p))); err != nil {
		t.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

// charDevs returns the node's uverbs/umad/issm devices as discovery reports them, keyed
// by name, so that expectations use the numbers the kernel (and the builder) assigned.
func charDevs(n *mocknode.Node) map[string]*CharDev {
	out := map[string]*CharDev{}
	for _, c := range n.CharDevs() {
		out[c.Name] = &CharDev{Name: c.Name, Major: c.Major, Minor: c.Minor}
	}
	return out
}

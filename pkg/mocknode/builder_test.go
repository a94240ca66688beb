package mocknode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smallNode is one IB port, one RoCE port in a bond and one soft-RoCE device: the
// shapes every layout rule touches, small enough to read in a failure message.
func smallNode() *Node {
	return &Node{
		PCIFunctions: []PCIFunction{
			{Address: "0000:03:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:01.0"}, Vendor: 0x15b3, Device: 0x1021, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0041, Class: 0x020700, NUMANode: 0, Driver: "mlx5_core"},
			{Address: "0000:04:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:02.0"}, Vendor: 0x15b3, Device: 0x101d, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0016, Class: 0x020000, NUMANode: -1, Driver: "mlx5_core"},
			{Address: "0000:04:00.2", Vendor: 0x15b3, Device: 0x101e, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0016, Class: 0x020000, NUMANode: -1, Driver: "mlx5_core", PhysFn: "0000:04:00.0"},
		},
		Netdevs: []Netdev{
			{Name: "ibp3s0", PCI: "0000:03:00.0", Address: IPoIBAddress(0x1049, 0x7c8c0903_00c3cfee), MTU: 4092, OperState: "up", Type: NetdevTypeInfiniBand},
			{Name: "enp4s0f0np0", PCI: "0000:04:00.0", Address: MAC(0xb83fd2000001), MTU: 9000, OperState: "up", Type: NetdevTypeEthernet, Master: "bond0"},
			{Name: "bond0", Address: MAC(0xb83fd2000001), MTU: 9000, OperState: "up", Type: NetdevTypeEthernet, Bond: true},
		},
		RDMADevices: []RDMADevice{
			{Name: "mlx5_0", PCI: "0000:03:00.0", NodeGUID: GUID(0x7c8c0903_00c3cfee), SysImageGUID: GUID(0x7c8c0903_00c3cfee), FWVer: "28.44.2524", BoardID: "MT_0000000838", HCAType: "MT4129",
				Ports: []Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand", LID: 0x538, SMLID: 0x1,
					GIDs: []GID{{Index: 0, GID: LinkLocalGID(0x7c8c0903_00c3cfee), Type: GIDTypeRoCEv1}}}}},
			{Name: "mlx5_1", PCI: "0000:04:00.0", NodeGUID: GUID(MACToGUID(0xb83fd2000001)), SysImageGUID: GUID(MACToGUID(0xb83fd2000001)), FWVer: "22.39.1002", HCAType: "MT4125",
				Ports: []Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "100 Gb/sec (4X EDR)", LinkLayer: "Ethernet",
					GIDs: RoCEGIDs("bond0", LinkLocalGID(MACToGUID(0xb83fd2000001)), "10.0.0.1")}}},
		},
	}
}

func TestWriteSmallNode(t *testing.T) {
	dir := t.TempDir()
	if err := smallNode().Write(dir, WriteOptions{}); err != nil {
		t.Fatalf("Write: %v", err)
	}
	links := map[string]string{
		"class/infiniband/mlx5_0": "../../devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0",
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/infiniband/mlx5_0/device": "../../../0000:03:00.0",
		"bus/pci/devices/0000:03:00.0":                                          "../../../devices/pci0000:00/0000:00:01.0/0000:03:00.0",
		"devices/pci0000:00/0000:00:02.0/0000:04:00.2/physfn":                   "../0000:04:00.0",
		"devices/pci0000:00/0000:00:02.0/0000:04:00.0/virtfn0":                  "../0000:04:00.2",
		"devices/pci0000:00/0000:00:01.0/0000:03:00.0/driver":                   "../../../../bus/pci/drivers/mlx5_core",
		"class/net/bond0": "../../devices/virtual/net/bond0",
		"devices/pci0000:00/0000:00:02.0/0000:04:00.0/net/enp4s0f0np0/master": "../../../../../virtual/net/bond0",
		"class/infiniband_verbs/uverbs1":                                      "../../devices/pci0000:00/0000:00:02.0/0000:04:00.0/infiniband_verbs/uverbs1",
	}
	for p, want := range links {
		t.Run(p, func(t *testing.T) {
			got, err := os.Readlink(filepath.Join(dir, "sys", p))
			if err != nil || got != want {
				t.Errorf("readlink = %q, %v; want %q", got, err, want)
			}
		})
	}
	files := map[string]string{
		"class/infiniband/mlx5_1/ports/1/gids/3":             "0000:0000:0000:0000:0000:ffff:0a00:0001\n",
		"class/infiniband/mlx5_1/ports/1/gid_attrs/types/3":  "RoCE v2\n",
		"class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/3":  "bond0\n",
		"class/infiniband/mlx5_1/ports/1/gids/4":             "0000:0000:0000:0000:0000:0000:0000:0000\n",
		"class/infiniband/mlx5_0/ports/1/state":              "4: ACTIVE\n",
		"class/infiniband/mlx5_0/ports/1/lid":                "0x538\n",
		"class/infiniband_mad/issm1/port":                    "1\n",
		"class/infiniband_mad/issm1/dev":                     "231:65\n",
		"class/net/bond0/bonding/slaves":                     "enp4s0f0np0\n",
		"class/net/ibp3s0/type":                              "32\n",
		"bus/pci/devices/0000:04:00.2/numa_node":             "-1\n",
		"module/ib_core/parameters/netns_mode":               "Y\n",
		"class/infiniband/mlx5_0/device/net/ibp3s0/dev_port": "0\n",
		"class/infiniband/mlx5_1/device/net/enp4s0f0np0/mtu": "9000\n",
		"class/net/enp4s0f0np0/master/bonding/slaves":        "enp4s0f0np0\n",
	}
	for p, want := range files {
		t.Run(p, func(t *testing.T) {
			got, err := os.ReadFile(filepath.Join(dir, "sys", p))
			if err != nil || string(got) != want {
				t.Errorf("read = %q, %v; want %q", got, err, want)
			}
		})
	}
	for _, p := range []string{"class/infiniband/mlx5_1/ports/1/gid_attrs/types/4", "class/infiniband/mlx5_0/ports/1/gid_attrs/ndevs/0"} {
		if _, err := os.Lstat(filepath.Join(dir, "sys", p)); !os.IsNotExist(err) {
			t.Errorf("%s: want no file, got err %v", p, err)
		}
	}
	chardevs, err := os.ReadFile(filepath.Join(dir, CharDevsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"/dev/infiniband/rdma_cm c 10 58",
		"/dev/infiniband/uverbs0 c 231 192",
		"/dev/infiniband/uverbs1 c 231 193",
		"/dev/infiniband/umad0 c 231 0",
		"/dev/infiniband/umad1 c 231 1",
		"/dev/infiniband/issm0 c 231 64",
		"/dev/infiniband/issm1 c 231 65",
	}, "\n") + "\n"
	if string(chardevs) != want {
		t.Errorf("chardevs = %q, want %q", chardevs, want)
	}
}

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
			{Address: "0000:03:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:01.0"}, Vendor: 0x15b3, Device: 0x1021, SubsystemVendor: 0x15b3, SubsystemDevice: 0x0041, Class: 0x020700, NUMANode: 0, Driver: "mlx5_core",
				VPD: &VPD{ProductName: "NVIDIA ConnectX-7 HHHL adapter card", PartNumber: "MCX75310AAS-NEAT", SerialNumber: "MT2347J0100T", UUID: "dc99c18c2e8bee11800058a2e10d4bce", FunctionID: "MT2347J0100TMLNXS0D0F0"}},
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
		GPUs:          []GPU{{Address: "0000:1b:00.0", Root: "pci0000:00", Bridges: []string{"0000:00:03.0"}, Device: 0x2330, SubsystemDevice: 0x16c1, NUMANode: 0, Driver: "nvidia"}},
		KernelModules: []KernelModule{{Name: "nvidia", Taint: "PO", Version: "570.172.08"}},
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

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *Node)
		want   []string
	}{
		{"valid", func(*Node) {}, nil},
		{"duplicate pci address", func(n *Node) { n.PCIFunctions[1].Address = "0000:03:00.0" }, []string{"pci function 0000:03:00.0: duplicate address"}},
		{"malformed pci address", func(n *Node) { n.PCIFunctions[0].Address = "03:00.0" }, []string{`pci function "03:00.0": malformed address`}},
		{"vf without pf", func(n *Node) { n.PCIFunctions[2].PhysFn = "0000:99:00.0" }, []string{"pci function 0000:04:00.2: physfn 0000:99:00.0: no such PF"}},
		{"vf of a vf", func(n *Node) {
			n.PCIFunctions = append(n.PCIFunctions, PCIFunction{Address: "0000:04:00.3", PhysFn: "0000:04:00.2", NUMANode: -1})
		}, []string{"physfn 0000:04:00.2 is itself a VF"}},
		{"vf away from its pf", func(n *Node) { n.PCIFunctions[2].Root = "pci0000:80" }, []string{"VF must sit under the same root and bridges"}},
		{"root in another domain", func(n *Node) { n.PCIFunctions[0].Root = "pci0001:00" }, []string{"root pci0001:00 is in another PCI domain"}},
		{"pf without root", func(n *Node) { n.PCIFunctions[0].Root = "" }, []string{"pci function 0000:03:00.0: missing PCIe root"}},
		{"duplicate ibdev", func(n *Node) { n.RDMADevices[1].Name = "mlx5_0" }, []string{"rdma device mlx5_0: duplicate name"}},
		{"port out of range", func(n *Node) { n.RDMADevices[0].Ports[0].Number = 2 }, []string{"rdma device mlx5_0: port 2: out of range or out of order"}},
		{"unknown state", func(n *Node) { n.RDMADevices[0].Ports[0].State = "UP" }, []string{`unknown state "UP"`}},
		{"malformed rate", func(n *Node) { n.RDMADevices[0].Ports[0].Rate = "400G" }, []string{`malformed rate "400G"`}},
		{"gid outside table", func(n *Node) { n.RDMADevices[1].Ports[0].GIDs[3].Index = 16 }, []string{"gid index 16 outside the table of 16 entries"}},
		{"gid twice", func(n *Node) { n.RDMADevices[1].Ports[0].GIDs[3].Index = 2 }, []string{"gid index 2 listed twice"}},
		{"gid of a missing netdev", func(n *Node) { n.RDMADevices[1].Ports[0].GIDs[0].Ndev = "eth9" }, []string{"gid index 0: netdev eth9 does not exist"}},
		{"infiniband gid with netdev", func(n *Node) { n.RDMADevices[0].Ports[0].GIDs[0].Ndev = "ibp3s0" }, []string{"InfiniBand entries have no netdev"}},
		{"missing pci function", func(n *Node) { n.RDMADevices[0].PCI = "0000:05:00.0" }, []string{"rdma device mlx5_0: pci function 0000:05:00.0 does not exist"}},
		{"virtual without parent", func(n *Node) { n.RDMADevices[0].PCI = "" }, []string{"a virtual device needs a parent netdev"}},
		{"malformed guid", func(n *Node) { n.RDMADevices[0].NodeGUID = "7c8c09030" }, []string{`malformed node_guid "7c8c09030"`}},
		{"master not a bond", func(n *Node) { n.Netdevs[1].Master = "ibp3s0" }, []string{"netdev enp4s0f0np0: master ibp3s0 is not a bond"}},
		{"bond with pci function", func(n *Node) { n.Netdevs[2].PCI = "0000:04:00.0" }, []string{"netdev bond0: a bond is a virtual interface"}},
		{"duplicate netdev", func(n *Node) { n.Netdevs[2].Name = "ibp3s0" }, []string{"netdev ibp3s0: duplicate name"}},
		{"netdev type", func(n *Node) { n.Netdevs[0].Type = 772 }, []string{"type 772: want 1 (Ethernet) or 32 (IPoIB)"}},
		{"netns mode", func(n *Node) { n.NetnsMode = "shared" }, []string{`netns mode "shared": want Y or N`}},
		{"vpd uuid", func(n *Node) { n.PCIFunctions[0].VPD.UUID = "DC99" }, []string{`pci function 0000:03:00.0: vpd: V3 "DC99": want 32 lower-case hex digits`}},
		{"vpd not ascii", func(n *Node) { n.PCIFunctions[0].VPD.SerialNumber = "MT\n1" }, []string{"vpd: SN", "printable ASCII"}},
		{"gpu at a function's address", func(n *Node) { n.GPUs[0].Address = "0000:03:00.0" }, []string{"gpu 0000:03:00.0: duplicate address"}},
		{"gpu root in another domain", func(n *Node) { n.GPUs[0].Root = "pci0001:00" }, []string{"gpu 0000:1b:00.0: root pci0001:00 is in another PCI domain"}},
		{"gpu of a network class", func(n *Node) { n.GPUs[0].Class = 0x020000 }, []string{"class 0x020000 is not a display controller"}},
		{"module taint", func(n *Node) { n.KernelModules[0].Taint = "po" }, []string{`kernel module nvidia: taint "po"`}},
		{"module twice", func(n *Node) { n.KernelModules = append(n.KernelModules, KernelModule{Name: "nvidia"}) }, []string{"kernel module nvidia: listed twice"}},
		{"module name", func(n *Node) { n.KernelModules[0].Name = "../nvidia" }, []string{`kernel module "../nvidia": malformed name`}},
		{"every problem at once", func(n *Node) {
			n.NetnsMode = "x"
			n.RDMADevices[1].Name = "mlx5_0"
			n.Netdevs[0].MTU = 0
		}, []string{"netns mode", "duplicate name", "mtu 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := smallNode()
			tc.mutate(n)
			if !checkValidate(t, n, tc.want) {
				return
			}
			// An invalid node is refused before anything is written.
			dir := filepath.Join(t.TempDir(), "out")
			if werr := n.Write(dir, WriteOptions{}); werr == nil {
				t.Error("Write accepted an invalid node")
			}
			if _, serr := os.Stat(dir); !os.IsNotExist(serr) {
				t.Errorf("Write of an invalid node created %s", dir)
			}
		})
	}
}

func TestWriteTarget(t *testing.T) {
	t.Run("missing directory is created", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "a", "b")
		if err := smallNode().Write(dir, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("non-empty directory is refused", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		err := smallNode().Write(dir, WriteOptions{})
		if err == nil || !strings.Contains(err.Error(), "is not empty") {
			t.Fatalf("Write = %v, want a not-empty error", err)
		}
		if _, err := os.Stat(filepath.Join(dir, SysDir)); !os.IsNotExist(err) {
			t.Error("refused Write still wrote the tree")
		}
	})
	t.Run("overwrite replaces only the mock node", func(t *testing.T) {
		dir := t.TempDir()
		p, _ := Lookup("sriov")
		if err := p.Node().Write(dir, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "notes"), []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := smallNode().Write(dir, WriteOptions{Overwrite: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(filepath.Join(dir, "sys/class/infiniband/mlx5_16")); !os.IsNotExist(err) {
			t.Error("the previous tree's mlx5_16 survived the overwrite")
		}
		if b, err := os.ReadFile(filepath.Join(dir, "notes")); err != nil || string(b) != "mine\n" {
			t.Errorf("overwrite touched a file it does not own: %q, %v", b, err)
		}
		if problems := checkTree(filepath.Join(dir, SysDir)); len(problems) > 0 {
			t.Errorf("overwritten tree does not conform: %v", problems)
		}
	})
	t.Run("a file as target is refused", func(t *testing.T) {
		f := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := smallNode().Write(f, WriteOptions{Overwrite: true}); err == nil {
			t.Error("Write into a regular file succeeded")
		}
	})
}

func TestKernelRel(t *testing.T) {
	tests := []struct{ from, target, want string }{
		{"class/infiniband", "devices/pci0000:00/0000:03:00.0/infiniband/mlx5_0", "../../devices/pci0000:00/0000:03:00.0/infiniband/mlx5_0"},
		{"devices/pci0000:00/0000:03:00.0/infiniband/mlx5_0", "devices/pci0000:00/0000:03:00.0", "../../../0000:03:00.0"},
		{"devices/pci0000:00/0000:3b:00.2", "devices/pci0000:00/0000:3b:00.0", "../0000:3b:00.0"},
		{"bus/pci/devices", "devices/pci0000:00/0000:03:00.0", "../../../devices/pci0000:00/0000:03:00.0"},
		{".", "module/ib_core", "module/ib_core"},
	}
	for _, tc := range tests {
		t.Run(tc.target, func(t *testing.T) {
			if got := kernelRel(tc.from, tc.target); got != tc.want {
				t.Errorf("kernelRel(%q, %q) = %q, want %q", tc.from, tc.target, got, tc.want)
			}
		})
	}
}

// checkValidate checks that n.Validate accepts n when want is empty, and otherwise
// refuses it with an error that mentions every entry of want. It reports whether n was
// refused, as the entries of want said.
func checkValidate(t *testing.T, n *Node, want []string) bool {
	t.Helper()
	err := n.Validate()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		return false
	}
	if err == nil {
		t.Fatalf("Validate accepted the node, want %q", want)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not mention %q", err, w)
		}
	}
	return true
}

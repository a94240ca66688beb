package mocknode

import (
	"os"
	"path/filepath"
	"testing"
)

// platformNode is smallNode on a one-socket platform whose functions all sit on NUMA node
// 0, as one root complex's must, with an adapter switch port listed in front of the GPU.
func platformNode() *Node {
	n := smallNode()
	n.PCIFunctions[1].NUMANode = 0
	n.PCIFunctions[0].Link = linkGen5x16
	n.PCIFunctions[1].Link = linkGen4x16
	n.PCIFunctions[2].Link = linkGen4x16
	n.GPUs[0].Bridges = []string{"0000:00:03.0", "0000:1a:00.0"}
	n.GPUs[0].Link = linkGen5x16
	n.Platform = &Platform{
		CPU: CPU{
			Modalias: "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,0001", Cores: 4, Threads: 2,
			RootPort: BridgeModel{Vendor: vendorIntel, Device: deviceSPRRootPort, SubsystemVendor: vendorIntel, Link: linkGen5x16},
		},
		Sockets: 1,
		Switch:  switchPEX890xx,
		Bridges: []Bridge{{Address: "0000:00:02.0", BridgeModel: BridgeModel{Vendor: vendorIntel, Device: deviceICXRootPort, Link: linkGen4x16}}},
	}
	return n
}

func TestValidatePlatform(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(n *Node)
		want   []string
	}{
		{"valid", func(*Node) {}, nil},
		{"lower-case modalias", func(n *Node) { n.Platform.CPU.Modalias = "cpu:type:x86,ven0000fam0006mod008f:feature:" }, []string{`platform: cpu modalias "cpu:type:x86,ven0000fam0006mod008f:feature:"`}},
		{"riscv", func(n *Node) { n.Platform.CPU.Modalias = "cpu:type:riscv64:feature:" }, []string{"cpu modalias", "aarch64"}},
		{"no cores", func(n *Node) { n.Platform.CPU.Cores = 0 }, []string{"cpu of 0 cores"}},
		{"three threads a core", func(n *Node) { n.Platform.CPU.Threads = 3 }, []string{"3 threads a core"}},
		{"no sockets", func(n *Node) { n.Platform.Sockets = 0 }, []string{"platform: 0 sockets"}},
		{"a NUMA node without socket", func(n *Node) {
			for i := range n.PCIFunctions {
				n.PCIFunctions[i].NUMANode = 1
			}
			n.GPUs[0].NUMANode = 1
		}, []string{"pci function 0000:03:00.0: numa node 1, but the platform has NUMA nodes 0 to 0, one per socket"}},
		{"a root complex on two NUMA nodes", func(n *Node) { n.Platform.Sockets, n.GPUs[0].NUMANode = 2, 1 }, []string{"gpu 0000:1b:00.0: numa node 1, but pci function 0000:03:00.0 below the same root pci0000:00 has 0"}},
		{"a bridge at two places", func(n *Node) { n.GPUs[0].Bridges = []string{"0000:00:03.0", "0000:00:01.0"} }, []string{"gpu 0000:1b:00.0: bridge 0000:00:01.0 below pci0000:00/0000:00:03.0, but elsewhere below pci0000:00"}},
		{"a bridge that is a function", func(n *Node) { n.GPUs[0].Bridges = []string{"0000:00:03.0", "0000:03:00.0"} }, []string{"bridge 0000:03:00.0 is also a function or GPU"}},
		{"a switch port without switch", func(n *Node) { n.Platform.Switch = BridgeModel{} }, []string{"platform: bridge 0000:1a:00.0 is a switch port, and the platform names no switch"}},
		{"a root port without model", func(n *Node) { n.Platform.CPU.RootPort = BridgeModel{} }, []string{"is a root port, and the cpu names no root port"}},
		{"a listed bridge on no path", func(n *Node) { n.Platform.Bridges[0].Address = "0000:99:01.0" }, []string{"platform: bridge 0000:99:01.0 is on the path of no function or GPU"}},
		{"a bridge listed twice", func(n *Node) { n.Platform.Bridges = append(n.Platform.Bridges, n.Platform.Bridges[0]) }, []string{"bridge 0000:00:02.0 listed twice"}},
		{"a bridge without vendor", func(n *Node) { n.Platform.Bridges[0].Vendor = 0 }, []string{"platform: bridge 0000:00:02.0: vendor 0x0000 is no vendor"}},
		{"a switch of PCIe 7", func(n *Node) { n.Platform.Switch.Link.Gen = 7 }, []string{"platform: switch: link: generation 7, want 1 to 6"}},
		{"a function link of three lanes", func(n *Node) { n.PCIFunctions[0].Link.Width = 3 }, []string{"pci function 0000:03:00.0: link: width x3"}},
		{"a GPU link without generation", func(n *Node) { n.GPUs[0].Link.Gen = 0 }, []string{"gpu 0000:1b:00.0: link: generation 0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := platformNode()
			tc.mutate(n)
			checkValidate(t, n, tc.want)
		})
	}
}

// TestPlatformFiles checks the files of platformNode: bridges by their place or listing,
// each once, with the NUMA node of their root; links where a function or bridge has one;
// the CPU files.
func TestPlatformFiles(t *testing.T) {
	dir := t.TempDir()
	if err := platformNode().Write(dir, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, SysDir)
	files := map[string]string{
		// A root port of the CPU.
		"devices/pci0000:00/0000:00:01.0/class":          "0x060400",
		"devices/pci0000:00/0000:00:01.0/vendor":         "0x8086",
		"devices/pci0000:00/0000:00:01.0/device":         "0x352a",
		"devices/pci0000:00/0000:00:01.0/numa_node":      "0",
		"devices/pci0000:00/0000:00:01.0/max_link_speed": "32.0 GT/s PCIe",
		"devices/pci0000:00/0000:00:01.0/max_link_width": "16",
		// A listed one.
		"devices/pci0000:00/0000:00:02.0/device":           "0x347a",
		"devices/pci0000:00/0000:00:02.0/subsystem_vendor": "0x0000",
		"devices/pci0000:00/0000:00:02.0/max_link_speed":   "16.0 GT/s PCIe",
		// A switch port.
		"devices/pci0000:00/0000:00:03.0/0000:1a:00.0/vendor": "0x1000",
		"devices/pci0000:00/0000:00:03.0/0000:1a:00.0/device": "0xc030",
		// The functions' and the GPU's own links; a VF states its PF's.
		"bus/pci/devices/0000:03:00.0/max_link_speed": "32.0 GT/s PCIe",
		"bus/pci/devices/0000:04:00.2/max_link_speed": "16.0 GT/s PCIe",
		"bus/pci/devices/0000:1b:00.0/max_link_width": "16",
		// Bridges are PCI functions like any other, bound to pcieport.
		"bus/pci/devices/0000:1a:00.0/class":           "0x060400",
		"bus/pci/drivers/pcieport/0000:00:03.0/device": "0x352a",
		// 8 CPUs: cores 0-3, their second threads 4-7.
		"devices/system/node/node0/cpumap": "ff",
		"devices/system/cpu/modalias":      "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,0001",
	}
	for p, want := range files {
		got, err := os.ReadFile(filepath.Join(root, p))
		if err != nil || string(got) != want+"\n" {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want+"\n")
		}
	}
	if got, err := os.Readlink(filepath.Join(root, "devices/pci0000:00/0000:00:01.0/driver")); err != nil || got != "../../../bus/pci/drivers/pcieport" {
		t.Errorf("driver link of a root port = %q, %v", got, err)
	}
	if problems := checkTree(root); len(problems) > 0 {
		t.Errorf("tree does not conform: %v", problems)
	}

	// Without a platform there are no bridge, CPU or NUMA files, as before platforms.
	n := platformNode()
	n.Platform = nil
	dir = t.TempDir()
	if err := n.Write(dir, WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"devices/pci0000:00/0000:00:01.0/class", "devices/system", "bus/pci/devices/0000:00:01.0", "bus/pci/drivers/pcieport"} {
		if _, err := os.Lstat(filepath.Join(dir, SysDir, p)); !os.IsNotExist(err) {
			t.Errorf("%s without a platform: %v, want no such file", p, err)
		}
	}
}

// TestCPUMap checks the NUMA nodes' bitmaps against the kernel's numbering and format,
// worked out by hand: SMT siblings in the upper half, the highest word only as wide as
// its bits.
func TestCPUMap(t *testing.T) {
	tests := []struct {
		name          string
		cpu           CPU
		sockets, node int
		want          string
	}{
		{name: "DGX H100 node 0: CPUs 0-55 and 112-167 of 224", cpu: cpuSapphireRapids, sockets: 2, node: 0,
			want: "00000000,000000ff,ffffffff,ffff0000,00000000,00ffffff,ffffffff"},
		{name: "DGX H100 node 1: CPUs 56-111 and 168-223", cpu: cpuSapphireRapids, sockets: 2, node: 1,
			want: "ffffffff,ffffff00,00000000,0000ffff,ffffffff,ff000000,00000000"},
		{name: "Grace node 1: CPUs 72-143 of 144, a first word of 16 bits", cpu: cpuGrace, sockets: 2, node: 1,
			want: "ffff,ffffffff,ffffff00,00000000,00000000"},
		{name: "Broadwell node 0: 56 CPUs, NCCL's own example", cpu: cpuBroadwell, sockets: 2, node: 0,
			want: "0003ff,f0003fff"},
		{name: "a VM of 8 CPUs", cpu: cpuVM, sockets: 1, node: 0, want: "ff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &Platform{CPU: tt.cpu, Sockets: tt.sockets}
			if got := p.cpumap(tt.node); got != tt.want {
				t.Errorf("cpumap(%d) = %q, want %q", tt.node, got, tt.want)
			}
		})
	}
}

package nccltopo

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// PCI facts of the fixtures' GPUs and bridges, as the PCI ID repository lists them.
const (
	vendorNVIDIA    = 0x10de
	deviceH100SXM   = 0x2330 // GH100 [H100 SXM5 80GB]
	classGPU3D      = 0x030200
	classBridgePCI  = 0x060400
	vendorBroadcom  = 0x1000 // PLX / Broadcom PCIe switches
	devicePEX89xxx  = 0xc030 // PEX89000 Gen5 switch ports
	vendorIntel     = 0x8086
	deviceRootPort  = 0x352a // a Sapphire Rapids PCIe root port
	classDataDirect = 0x080100
	// deviceDataDirect is made up: the fixture needs a device ID, NCCL and this package
	// only look at the class.
	deviceDataDirect = 0x2100

	gen5 = "32.0 GT/s PCIe"
	gen4 = "16.0 GT/s PCIe"
)

// platform is what mocknode does not lay out and this package reads: the PCI attributes
// of bridges, every function's link capability, the NUMA nodes' CPU masks and the CPU
// type. Fixtures are a mocknode.Node written to disk, then these files added.
type platform struct {
	// modalias is the content of devices/system/cpu/modalias; empty leaves it out.
	modalias string
	// cpumaps are the NUMA nodes' cpumap files.
	cpumaps map[int]string
	// links overrides the default capability (gen5 x16) of functions and bridges, by
	// bus ID; a zero link leaves the files out.
	links map[string]linkCap
	// skipLinks leaves out the link files of every function.
	skipLinks bool
}

type linkCap struct {
	speed string
	width int
}

// Sapphire Rapids in two sockets: family 6, model 0x8f.
const modaliasSPR = "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,0001,0002,0003"

func defaultPlatform() platform {
	return platform{
		modalias: modaliasSPR,
		cpumaps: map[int]string{
			0: "00000000,00000000,00000000,ffffffff,ffffffff",
			1: "00000000,00000000,ffffffff,00000000,00000000",
		},
	}
}

// writeFixture writes n and p below a temporary directory and returns its sysfs.
func writeFixture(t *testing.T, n *mocknode.Node, p platform) (*sysfs.FS, string) {
	t.Helper()
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, mocknode.SysDir)
	put := func(rel, value string) {
		t.Helper()
		full := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	linkFiles := func(dir, busID string) {
		if p.skipLinks {
			return
		}
		l, ok := p.links[busID]
		if !ok {
			l = linkCap{gen5, 16}
		}
		if l.speed != "" {
			put(dir+"/max_link_speed", l.speed)
		}
		if l.width != 0 {
			put(dir+"/max_link_width", fmt.Sprint(l.width))
		}
	}
	done := map[string]bool{}
	for _, f := range n.PCIFunctions {
		if f.Root == "" {
			continue // a VF beside its PF: its bridges are its PF's
		}
		dir := path.Join("devices", f.Root)
		for i, b := range f.Bridges {
			dir = path.Join(dir, b)
			if done[dir] {
				continue
			}
			done[dir] = true
			vendor, device := vendorBroadcom, devicePEX89xxx
			if i == 0 {
				vendor, device = vendorIntel, deviceRootPort
			}
			put(dir+"/class", fmt.Sprintf("0x%06x", classBridgePCI))
			put(dir+"/vendor", fmt.Sprintf("0x%04x", vendor))
			put(dir+"/device", fmt.Sprintf("0x%04x", device))
			put(dir+"/subsystem_vendor", fmt.Sprintf("0x%04x", vendor))
			put(dir+"/subsystem_device", "0x0000")
			put(dir+"/numa_node", fmt.Sprint(f.NUMANode))
			linkFiles(dir, b)
		}
		linkFiles(path.Join(dir, f.Address), f.Address)
	}
	if p.modalias != "" {
		put(modaliasFile, p.modalias)
	}
	for node, mask := range p.cpumaps {
		put(fmt.Sprintf(nodeCPUMap, node), mask)
	}
	fsys, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	return fsys, root
}

// gpu is an H100 SXM5 at addr behind root and bridges.
func gpu(addr, root string, bridges []string, numa int) mocknode.PCIFunction {
	return mocknode.PCIFunction{
		Address: addr, Root: root, Bridges: bridges, NUMANode: numa,
		Vendor: vendorNVIDIA, Device: deviceH100SXM, SubsystemVendor: vendorNVIDIA, SubsystemDevice: 0x16c1,
		Class: classGPU3D, Driver: "nvidia",
	}
}

// dgxH100 is the dgx-h100 profile with its eight GPUs, one behind the PCIe switch of each
// compute NIC (on a second downstream port), as on the real machine; it returns the GPUs'
// bus IDs in the order of the NICs.
func dgxH100(t *testing.T) (*mocknode.Node, []string) {
	t.Helper()
	p, err := mocknode.Lookup("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node()
	var gpus []string
	for _, f := range n.PCIFunctions {
		if f.Class != 0x020700 { // the storage card is Ethernet and has no GPU
			continue
		}
		up := f.Bridges[1] // the switch's upstream port, rr+1:00.0
		var dom, bus, dev, fn int
		if _, err := fmt.Sscanf(up, "%x:%x:%x.%x", &dom, &bus, &dev, &fn); err != nil {
			t.Fatal(err)
		}
		down := fmt.Sprintf("%04x:%02x:01.0", dom, bus+1)
		addr := fmt.Sprintf("%04x:%02x:00.0", dom, bus+3)
		n.PCIFunctions = append(n.PCIFunctions, gpu(addr, f.Root, []string{f.Bridges[0], up, down}, f.NUMANode))
		gpus = append(gpus, addr)
	}
	return n, gpus
}

// ports returns the ports of n whose ibdev is in ibdevs, in inventory order; none means
// all.
func ports(n *mocknode.Node, ibdevs ...string) []discovery.Port {
	var out []discovery.Port
	for _, p := range n.ExpectedPorts() {
		if len(ibdevs) == 0 || slices.Contains(ibdevs, p.IBDev) {
			out = append(out, p)
		}
	}
	return out
}

// subset keeps of n the RDMA devices named, their functions and netdevs, and the GPUs
// on the PCIe roots of those functions: a smaller tree that writes faster.
func subset(n *mocknode.Node, ibdevs ...string) *mocknode.Node {
	out := &mocknode.Node{NetnsMode: n.NetnsMode}
	fns := map[string]bool{}
	roots := map[string]bool{}
	for _, d := range n.RDMADevices {
		if slices.Contains(ibdevs, d.Name) {
			out.RDMADevices = append(out.RDMADevices, d)
			fns[d.PCI] = true
		}
	}
	for _, f := range n.PCIFunctions {
		if fns[f.Address] {
			roots[f.Root] = true
		}
	}
	for _, f := range n.PCIFunctions {
		if fns[f.Address] || (f.Class>>16 == 0x03 && roots[f.Root]) {
			out.PCIFunctions = append(out.PCIFunctions, f)
		}
	}
	for _, d := range n.Netdevs {
		if fns[d.PCI] {
			out.Netdevs = append(out.Netdevs, d)
		}
	}
	return out
}

package mocknode

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// Platform is the machine around a node's adapters and GPUs, laid out as the kernel lays it
// out: the CPU type (devices/system/cpu/modalias), one NUMA node per socket with its CPUs
// (devices/system/node/node<N>/cpumap), and every PCI bridge on the paths from the root
// complexes to the functions and GPUs, with its IDs, class 0x060400, NUMA node and link.
// Discovery reads none of it; the NCCL topology file (nccl-topology.md) reads all of it.
//
// A bridge is what its place makes it: the first bridge of a path is one of the CPU's root
// ports, every later one a port of the platform's PCIe switch; Bridges names those that are
// something else, such as the ports of an adapter's own switch. A bridge's NUMA node is that
// of the functions below its root complex, which must agree.
type Platform struct {
	// CPU is the processor in every socket.
	CPU CPU `json:"cpu"`
	// Sockets is the number of CPU sockets, one NUMA node each: node N is socket N.
	Sockets int `json:"sockets"`
	// Switch is the PCIe switch whose ports are the bridges after a root port; the zero
	// value is allowed only where no path has one.
	Switch BridgeModel `json:"switch,omitzero"`
	// Bridges are the bridges that are not what their place makes them, by address.
	Bridges []Bridge `json:"bridges,omitempty"`
}

// CPU is a processor model as sysfs shows it.
type CPU struct {
	// Modalias is devices/system/cpu/modalias as the kernel writes it:
	// "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,..." on x86 (the kernel's vendor
	// number, family and model in upper-case hex), "cpu:type:aarch64:feature:,..." on arm64.
	Modalias string `json:"modalias"`
	// Cores is the number of cores of one socket, Threads the hardware threads of a core
	// (2 with SMT). The kernel numbers the first thread of every core, socket by socket,
	// then the second threads in the same order: thread t of core c of socket s is CPU
	// (t*sockets + s)*cores + c, so that node 0 of a DGX H100 holds CPUs 0-55 and 112-167.
	Cores   int `json:"cores"`
	Threads int `json:"threads"`
	// RootPort is what the CPU's PCIe root ports are; the zero value is allowed only where
	// no path has a bridge.
	RootPort BridgeModel `json:"rootPort,omitzero"`
}

// BridgeModel is what a PCI bridge says about itself: its PCI IDs and its link.
type BridgeModel struct {
	Vendor          uint16 `json:"vendor"`
	Device          uint16 `json:"device"`
	SubsystemVendor uint16 `json:"subsystemVendor"`
	SubsystemDevice uint16 `json:"subsystemDevice"`
	// Link is the link the bridge is built for.
	Link Link `json:"link"`
}

// Bridge is one bridge, at Address, that is not what its place on a path makes it.
type Bridge struct {
	// Address is the bridge's bus ID, one of the Bridges of a function or GPU.
	Address string `json:"address"`
	BridgeModel
}

// ClassBridge is the PCI class of a PCI-to-PCI bridge: root ports and switch ports.
const ClassBridge = 0x060400

// Link is a PCIe link as max_link_speed and max_link_width state it; the zero Link writes
// neither file.
type Link struct {
	// Gen is the PCIe generation: 1 (2.5 GT/s) to 6 (64 GT/s).
	Gen int `json:"gen"`
	// Width is the number of lanes: 1, 2, 4, 8, 12, 16 or 32.
	Width int `json:"width"`
}

// linkSpeeds are max_link_speed by generation, as the kernel's pci_speed_string spells
// them.
var linkSpeeds = map[int]string{
	1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe",
	4: "16.0 GT/s PCIe", 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe",
}

// Speed is max_link_speed of the link, e.g. "32.0 GT/s PCIe"; empty for the zero Link.
func (l Link) Speed() string { return linkSpeeds[l.Gen] }

// pciPath is where a function or GPU with a path of its own sits.
type pciPath struct {
	owner   string // for errors: "pci function 0000:18:00.0", "gpu 0000:1b:00.0"
	root    string
	bridges []string
	numa    int
}

// pciPaths lists the paths of the node's functions (VFs beside their PF have none of
// their own) and GPUs, in the order of the description.
func (n *Node) pciPaths() []pciPath {
	var out []pciPath
	for _, f := range n.PCIFunctions {
		if f.Root != "" {
			out = append(out, pciPath{"pci function " + f.Address, f.Root, f.Bridges, f.NUMANode})
		}
	}
	for _, g := range n.GPUs {
		out = append(out, pciPath{"gpu " + g.Address, g.Root, g.Bridges, g.NUMANode})
	}
	return out
}

// bridgeModel is what the bridge at position i of a path is.
func (p *Platform) bridgeModel(i int, addr string) BridgeModel {
	for _, b := range p.Bridges {
		if b.Address == addr {
			return b.BridgeModel
		}
	}
	if i == 0 {
		return p.CPU.RootPort
	}
	return p.Switch
}

// layoutLink writes the link files of the function or bridge at dir.
func layoutLink(t *tree, dir string, l Link) {
	if l == (Link{}) {
		return
	}
	t.file(path.Join(dir, "max_link_speed"), l.Speed())
	t.file(path.Join(dir, "max_link_width"), strconv.Itoa(l.Width))
}

// bridgeDriver is the driver the kernel binds every PCIe port to.
const bridgeDriver = "bus/pci/drivers/pcieport"

// layoutPlatform writes the bridges, each once, linked from bus/pci/devices and bound to
// pcieport as on a real node, and the CPU files. n must be valid.
func (n *Node) layoutPlatform(t *tree) {
	p := n.Platform
	if p == nil {
		return
	}
	done := map[string]bool{}
	for _, pp := range n.pciPaths() {
		dir := path.Join("devices", pp.root)
		for i, b := range pp.bridges {
			dir = path.Join(dir, b)
			if done[dir] {
				continue
			}
			done[dir] = true
			m := p.bridgeModel(i, b)
			t.link(path.Join("bus/pci/devices", b), dir)
			t.dir(bridgeDriver)
			t.link(path.Join(dir, "driver"), bridgeDriver)
			t.link(path.Join(bridgeDriver, b), dir)
			t.file(path.Join(dir, "class"), fmt.Sprintf("0x%06x", ClassBridge))
			t.file(path.Join(dir, "vendor"), fmt.Sprintf("0x%04x", m.Vendor))
			t.file(path.Join(dir, "device"), fmt.Sprintf("0x%04x", m.Device))
			t.file(path.Join(dir, "subsystem_vendor"), fmt.Sprintf("0x%04x", m.SubsystemVendor))
			t.file(path.Join(dir, "subsystem_device"), fmt.Sprintf("0x%04x", m.SubsystemDevice))
			t.file(path.Join(dir, "numa_node"), strconv.Itoa(pp.numa))
			layoutLink(t, dir, m.Link)
		}
	}
	t.file("devices/system/cpu/modalias", p.CPU.Modalias)
	for s := range p.Sockets {
		t.file(fmt.Sprintf("devices/system/node/node%d/cpumap", s), p.cpumap(s))
	}
}

// cpumap is the cpumap file of NUMA node s: a bitmap of every possible CPU (all the
// sockets' threads), printed as the kernel prints bitmaps: 32-bit words in hex, the
// highest first, separated by commas, the highest word only as wide as its bits need
// (lib/vsprintf.c, bitmap_string). 144 CPUs thus give a first word of four digits.
func (p *Platform) cpumap(s int) string {
	c := p.CPU
	nbits := p.Sockets * c.Cores * c.Threads
	set := make([]bool, nbits)
	for t := range c.Threads {
		for core := range c.Cores {
			set[(t*p.Sockets+s)*c.Cores+core] = true
		}
	}
	var words []string
	for hi := (nbits + 31) / 32 * 32; hi > 0; hi -= 32 {
		lo := hi - 32
		var w uint32
		for b := lo; b < min(hi, nbits); b++ {
			if set[b] {
				w |= 1 << (b - lo)
			}
		}
		digits := 8
		if hi > nbits {
			digits = (nbits - lo + 3) / 4
		}
		words = append(words, fmt.Sprintf("%0*x", digits, w))
	}
	return strings.Join(words, ",")
}

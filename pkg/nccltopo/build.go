package nccltopo

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// XMLVersion is the version of the topology format NCCL reads (NCCL_TOPO_XML_VERSION); it
// refuses a file with any other.
const XMLVersion = 1

// DataDirectSuffix is appended to an RDMA device's name for the net NCCL makes of its Data
// Direct DMA function (mlx5_0_dma): NCCL 2.27 exposes that net beside the device's own,
// 2.28 and later by default instead of it.
const DataDirectSuffix = "_dma"

// ErrNothingToDescribe is returned when none of the input has a PCI function: a claim of
// virtual devices only needs no topology file.
var ErrNothingToDescribe = errors.New("no PCI device to describe")

// Input is what one claim got.
type Input struct {
	// Ports are the claim's RDMA ports, as discovery reported them.
	Ports []discovery.Port
	// GPUBusIDs are the PCI bus IDs of the GPUs prepared in the same claim, as sysfs
	// spells them (0000:3b:00.0), in any order.
	GPUBusIDs []string
}

// Result is a topology file and what it leaves out.
type Result struct {
	// XML is the file, for NCCL_TOPO_FILE.
	XML []byte
	// Skipped lists the ports the file has no place for, in input order, for the caller
	// to log.
	Skipped []Skipped
}

// Skipped is a port left out of the file, and why.
type Skipped struct {
	IBDev  string
	Port   int
	Reason string
}

// ReasonVirtual is why a virtual device (soft-RoCE, soft-iWARP) is left out.
const ReasonVirtual = "virtual device without a PCI function: NCCL attaches its net to the first CPU itself"

// endpoint is one PCI function the file describes: a GPU, or the function (or Data
// Direct function) below which NCCL finds one or more nets.
type endpoint struct {
	busID string
	who   string // for errors: "GPU 0000:3b:00.0", "port mlx5_0/1"
	gpu   bool
	nets  []string // net names, in the order of the ports, each once
}

// Build writes the NCCL topology file of one claim from the sysfs tree fsys (see
// doc.go for what it holds and why). Bad input, such as a bus ID that is not in sysfs or
// a file that does not parse, is an error that names the device and the file; a claim
// whose devices are all virtual is ErrNothingToDescribe.
func Build(fsys *sysfs.FS, in Input) (Result, error) {
	eps, skipped, err := endpoints(in)
	if err != nil {
		return Result{}, err
	}
	if len(eps) == 0 {
		return Result{Skipped: skipped}, fmt.Errorf("build NCCL topology of %d ports and %d GPUs: %w", len(in.Ports), len(in.GPUBusIDs), ErrNothingToDescribe)
	}
	root, err := tree(fsys, eps)
	if err != nil {
		return Result{}, err
	}
	b, err := root.marshal()
	if err != nil {
		return Result{}, fmt.Errorf("write NCCL topology: %w", err)
	}
	return Result{XML: b, Skipped: skipped}, nil
}

// endpoints checks the input and returns its PCI functions sorted by bus ID.
func endpoints(in Input) ([]*endpoint, []Skipped, error) {
	byID := map[string]*endpoint{}
	add := func(busID, who string, gpu bool, net string) error {
		if err := checkBusID(busID); err != nil {
			return fmt.Errorf("%s: %w", who, err)
		}
		e := byID[busID]
		switch {
		case e == nil:
			e = &endpoint{busID: busID, who: who, gpu: gpu}
			byID[busID] = e
		case gpu && e.gpu:
			return fmt.Errorf("%s: listed twice", who)
		case gpu != e.gpu:
			return fmt.Errorf("%s: bus ID %s is also %s", who, busID, e.who)
		}
		if net != "" && !slices.Contains(e.nets, net) {
			e.nets = append(e.nets, net)
		}
		return nil
	}
	for _, id := range in.GPUBusIDs {
		if err := add(id, "GPU "+id, true, ""); err != nil {
			return nil, nil, err
		}
	}
	var skipped []Skipped
	for _, p := range in.Ports {
		who := "port " + p.IBDev + "/" + strconv.Itoa(p.Port)
		if p.PCIBusID == "" {
			if !p.Virtual {
				return nil, nil, fmt.Errorf("%s: no PCI bus ID, and not a virtual device", who)
			}
			skipped = append(skipped, Skipped{IBDev: p.IBDev, Port: p.Port, Reason: ReasonVirtual})
			continue
		}
		if err := checkValue(p.IBDev); err != nil || p.IBDev == "" {
			return nil, nil, fmt.Errorf("%s: device name %q cannot be a net name of the file", who, clip(p.IBDev))
		}
		if err := add(p.PCIBusID, who, false, p.IBDev); err != nil {
			return nil, nil, err
		}
		if p.DataDirectBusID != "" && p.DataDirectBusID != p.PCIBusID {
			if err := add(p.DataDirectBusID, who+" Data Direct", false, p.IBDev+DataDirectSuffix); err != nil {
				return nil, nil, err
			}
		}
	}
	eps := make([]*endpoint, 0, len(byID))
	for _, e := range byID {
		eps = append(eps, e)
	}
	slices.SortFunc(eps, func(a, b *endpoint) int { return cmp.Compare(a.busID, b.busID) })
	return eps, skipped, nil
}

// pciNode is a PCI function in the tree: a bridge, an endpoint, or (never for a sane tree,
// refused below) both.
type pciNode struct {
	fn   *function
	ep   *endpoint
	subs map[string]*pciNode
}

// tree reads the PCI path of every endpoint and returns the system element.
func tree(fsys *sysfs.FS, eps []*endpoint) (*element, error) {
	cpus := map[int]map[string]*pciNode{} // NUMA node -> top functions by bus ID
	nodes := map[string]*pciNode{}        // canonical directory -> node
	for _, e := range eps {
		dirs, err := chain(fsys, e.busID)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.who, err)
		}
		var parent *pciNode
		for i, dir := range dirs {
			n := nodes[dir]
			if n == nil {
				fn, err := readFunction(fsys, dir)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", e.who, err)
				}
				n = &pciNode{fn: fn, subs: map[string]*pciNode{}}
				nodes[dir] = n
				if i == 0 {
					if cpus[fn.numa] == nil {
						cpus[fn.numa] = map[string]*pciNode{}
					}
					cpus[fn.numa][fn.busID] = n
				} else {
					parent.subs[fn.busID] = n
				}
			}
			parent = n
		}
		parent.ep = e
		if e.gpu && parent.fn.class>>16 != 0x03 {
			return nil, fmt.Errorf("%s: class 0x%06x in %s/class is not a display controller (0x03xxxx)", e.who, parent.fn.class, dirs[len(dirs)-1])
		}
	}
	for _, n := range nodes {
		if n.ep != nil && len(n.subs) > 0 {
			return nil, fmt.Errorf("%s: function %s is a bridge above other devices of the claim; NCCL reads no PCI below a NIC or GPU", n.ep.who, n.fn.busID)
		}
	}
	info, err := read(fsys, modaliasFile, parseModalias)
	if err != nil {
		return nil, fmt.Errorf("read the CPU type: %w", err)
	}
	system := &element{name: "system", attrs: []attr{{"version", strconv.Itoa(XMLVersion)}}}
	numas := make([]int, 0, len(cpus))
	for numa := range cpus {
		numas = append(numas, numa)
	}
	slices.Sort(numas)
	for _, numa := range numas {
		c, err := cpuElement(fsys, numa, info)
		if err != nil {
			return nil, err
		}
		c.subs = pciElements(cpus[numa])
		system.subs = append(system.subs, c)
	}
	return system, nil
}

// cpuElement is the cpu element of one NUMA node, without children.
func cpuElement(fsys *sysfs.FS, numa int, info cpuInfo) (*element, error) {
	c := &element{name: "cpu", attrs: []attr{{"numaid", strconv.Itoa(numa)}}}
	if numa >= 0 {
		name := fmt.Sprintf(nodeCPUMap, numa)
		mask, err := read(fsys, name, parseCPUMap)
		if err != nil {
			return nil, fmt.Errorf("read the CPUs of NUMA node %d: %w", numa, err)
		}
		// A mask too long for NCCL is left out: NCCL then has no affinity for this
		// node, which it only uses for the node of its own GPU, and reads that one from
		// sysfs itself.
		if len(mask) <= MaxValueLen {
			c.attrs = append(c.attrs, attr{"affinity", mask})
		}
	}
	c.attrs = append(c.attrs, info.attrs()...)
	return c, nil
}

// pciElements returns the elements of nodes, sorted by bus ID as NCCL sorts them.
func pciElements(nodes map[string]*pciNode) []*element {
	ids := make([]string, 0, len(nodes))
	for id := range nodes {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	out := make([]*element, 0, len(ids))
	for _, id := range ids {
		n := nodes[id]
		f := n.fn
		e := &element{name: "pci", attrs: []attr{
			{"busid", f.busID},
			{"class", fmt.Sprintf("0x%06x", f.class)},
			{"vendor", f.vendor},
			{"device", f.device},
			{"subsystem_vendor", f.subVendor},
			{"subsystem_device", f.subDevice},
			{"link_speed", f.linkSpeed},
			{"link_width", f.linkWidth},
		}}
		if n.ep != nil && len(n.ep.nets) > 0 {
			nic := &element{name: "nic"}
			for _, name := range n.ep.nets {
				nic.subs = append(nic.subs, &element{name: "net", attrs: []attr{{"name", name}}})
			}
			e.subs = append(e.subs, nic)
		}
		e.subs = append(e.subs, pciElements(n.subs)...)
		out = append(out, e)
	}
	return out
}

package mocknode

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

var (
	bdfRE  = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-1][0-9a-f]\.[0-7]$`)
	rootRE = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)
	guidRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}$`)
	rateRE = regexp.MustCompile(`^\d+(\.5)? Gb/sec \(\d+X [A-Z]+\)$`)
	// nameRE admits what the kernel admits in ibdev and netdev names that a fixture needs;
	// nothing that could escape a directory.
	nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:-]*$`)
)

// portStates and physStates map the names sysfs prints to their numeric codes.
var (
	portStates = map[string]int{"NOP": 0, "DOWN": 1, "INIT": 2, "ARMED": 3, "ACTIVE": 4, "ACTIVE_DEFER": 5}
	physStates = map[string]int{
		"Sleep": 1, "Polling": 2, "Disabled": 3, "PortConfigurationTraining": 4,
		"LinkUp": 5, "LinkErrorRecovery": 6, "Phy Test": 7,
	}
	linkLayers = map[string]bool{"InfiniBand": true, "Ethernet": true, "Unknown": true}
	operStates = map[string]bool{
		"unknown": true, "notpresent": true, "down": true, "lowerlayerdown": true,
		"testing": true, "dormant": true, "up": true,
	}
)

// Validate reports every inconsistency of the description at once: malformed or duplicate
// names and addresses, references to functions or netdevs that do not exist, ports out of
// range, VFs without a PF, GID entries outside the table.
func (n *Node) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if n.NetnsMode != "" && n.NetnsMode != "Y" && n.NetnsMode != "N" {
		add("netns mode %q: want Y or N", n.NetnsMode)
	}

	fns := map[string]*PCIFunction{}
	for i := range n.PCIFunctions {
		f := &n.PCIFunctions[i]
		if !bdfRE.MatchString(f.Address) {
			add("pci function %q: malformed address, want dddd:bb:dd.f in lower-case hex", f.Address)
			continue
		}
		if fns[f.Address] != nil {
			add("pci function %s: duplicate address", f.Address)
			continue
		}
		fns[f.Address] = f
	}
	for i := range n.PCIFunctions {
		f := &n.PCIFunctions[i]
		if fns[f.Address] != f {
			continue
		}
		errs = append(errs, validateFunction(f, fns)...)
	}

	netdevs := map[string]*Netdev{}
	for i := range n.Netdevs {
		d := &n.Netdevs[i]
		if !nameRE.MatchString(d.Name) || len(d.Name) > 15 {
			add("netdev %q: malformed name", d.Name)
			continue
		}
		if netdevs[d.Name] != nil {
			add("netdev %s: duplicate name", d.Name)
			continue
		}
		netdevs[d.Name] = d
	}
	for i := range n.Netdevs {
		d := &n.Netdevs[i]
		if netdevs[d.Name] != d {
			continue
		}
		errs = append(errs, validateNetdev(d, fns, netdevs)...)
	}

	errs = append(errs, n.validateGPUs(fns)...)
	errs = append(errs, n.validateModules()...)
	if n.Platform != nil {
		errs = append(errs, n.validatePlatform()...)
	}

	ibdevs := map[string]bool{}
	for i := range n.RDMADevices {
		d := &n.RDMADevices[i]
		if !nameRE.MatchString(d.Name) {
			add("rdma device %q: malformed name", d.Name)
			continue
		}
		if ibdevs[d.Name] {
			add("rdma device %s: duplicate name", d.Name)
			continue
		}
		ibdevs[d.Name] = true
		errs = append(errs, validateRDMADevice(d, fns, netdevs)...)
	}
	return errors.Join(errs...)
}

func validateFunction(f *PCIFunction, fns map[string]*PCIFunction) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("pci function %s: "+format, append([]any{f.Address}, args...)...))
	}
	if f.PhysFn != "" {
		pf := fns[f.PhysFn]
		switch {
		case pf == nil:
			add("physfn %s: no such PF", f.PhysFn)
		case pf.PhysFn != "":
			add("physfn %s is itself a VF", f.PhysFn)
		case (f.Root != "" || len(f.Bridges) > 0) && (f.Root != pf.Root || !slices.Equal(f.Bridges, pf.Bridges)):
			// physfn is the sibling link ../<pf>, so the VF must sit next to its PF.
			add("VF must sit under the same root and bridges as its PF %s", f.PhysFn)
		}
	} else if f.Root == "" {
		add("missing PCIe root")
	}
	if f.Root != "" {
		if !rootRE.MatchString(f.Root) {
			add("malformed root %q, want pci<domain>:<bus>", f.Root)
		} else if f.Root[3:7] != f.Address[:4] {
			add("root %s is in another PCI domain", f.Root)
		}
	}
	for _, b := range f.Bridges {
		if !bdfRE.MatchString(b) {
			add("malformed bridge address %q", b)
		} else if b == f.Address {
			add("bridge %s is the function itself", b)
		}
	}
	if f.Class > 0xffffff {
		add("class %#x does not fit 24 bits", f.Class)
	}
	if f.NUMANode < -1 {
		add("numa node %d: want -1 (unknown) or more", f.NUMANode)
	}
	if f.Driver != "" && !nameRE.MatchString(f.Driver) {
		add("malformed driver name %q", f.Driver)
	}
	if f.VPD != nil {
		for _, err := range validateVPD(f.VPD) {
			add("vpd: %w", err)
		}
	}
	if err := validateLink(f.Link); err != nil {
		add("link: %w", err)
	}
	return errs
}

var (
	vpdUUIDRE = regexp.MustCompile(`^[0-9a-f]{32}$`)
	taintRE   = regexp.MustCompile(`^[A-Z]*$`)
	versionRE = regexp.MustCompile(`^[0-9A-Za-z][0-9A-Za-z.+_-]*$`)
)

// validateVPD checks what the encoding needs: printable ASCII of at most 255 bytes per
// keyword (a one-byte length), and a UUID in the form NVIDIA adapters write.
func validateVPD(v *VPD) []error {
	var errs []error
	for _, kv := range [][2]string{{"product name", v.ProductName}, {"PN", v.PartNumber}, {"SN", v.SerialNumber}, {"V3", v.UUID}, {"VU", v.FunctionID}} {
		if len(kv[1]) > 255 || strings.IndexFunc(kv[1], func(r rune) bool { return r < ' ' || r > '~' }) >= 0 {
			errs = append(errs, fmt.Errorf("%s %q: want printable ASCII of at most 255 bytes", kv[0], kv[1]))
		}
	}
	if v.UUID != "" && !vpdUUIDRE.MatchString(v.UUID) {
		errs = append(errs, fmt.Errorf("V3 %q: want 32 lower-case hex digits", v.UUID))
	}
	return errs
}

// validateGPUs checks the GPUs as PCI functions: well-formed, unique addresses that no
// other function has, a root in their domain, a display class, a driver name.
func (n *Node) validateGPUs(fns map[string]*PCIFunction) []error {
	var errs []error
	seen := map[string]bool{}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		add := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("gpu %s: "+format, append([]any{g.Address}, args...)...))
		}
		switch {
		case !bdfRE.MatchString(g.Address):
			add("malformed address, want dddd:bb:dd.f in lower-case hex")
			continue
		case seen[g.Address] || fns[g.Address] != nil:
			add("duplicate address")
			continue
		}
		seen[g.Address] = true
		if !rootRE.MatchString(g.Root) {
			add("malformed root %q, want pci<domain>:<bus>", g.Root)
		} else if g.Root[3:7] != g.Address[:4] {
			add("root %s is in another PCI domain", g.Root)
		}
		for _, b := range g.Bridges {
			if !bdfRE.MatchString(b) || b == g.Address {
				add("malformed bridge address %q", b)
			}
		}
		if g.Class != 0 && g.Class>>16 != 0x03 {
			add("class %#06x is not a display controller (0x03xxxx)", g.Class)
		}
		if g.NUMANode < -1 {
			add("numa node %d: want -1 (unknown) or more", g.NUMANode)
		}
		if g.Driver != "" && !nameRE.MatchString(g.Driver) {
			add("malformed driver name %q", g.Driver)
		}
		if err := validateLink(g.Link); err != nil {
			add("link: %w", err)
		}
	}
	return errs
}

// validateLink checks a link against what PCIe has: generations 1 to 6, the widths a link
// can train to, both or neither.
func validateLink(l Link) error {
	switch {
	case l == Link{}:
		return nil
	case l.Speed() == "":
		return fmt.Errorf("generation %d, want 1 to 6", l.Gen)
	case !slices.Contains([]int{1, 2, 4, 8, 12, 16, 32}, l.Width):
		return fmt.Errorf("width x%d, want x1, x2, x4, x8, x12, x16 or x32", l.Width)
	}
	return nil
}

// validateModules checks module names (they become directories), taints (the kernel's
// flags are upper-case letters) and versions.
func (n *Node) validateModules() []error {
	var errs []error
	seen := map[string]bool{}
	for _, m := range n.KernelModules {
		switch {
		case !nameRE.MatchString(m.Name) || strings.ContainsAny(m.Name, ".:"):
			errs = append(errs, fmt.Errorf("kernel module %q: malformed name", m.Name))
			continue
		case seen[m.Name] || m.Name == "ib_core":
			errs = append(errs, fmt.Errorf("kernel module %s: listed twice (ib_core is always there)", m.Name))
			continue
		}
		seen[m.Name] = true
		if !taintRE.MatchString(m.Taint) {
			errs = append(errs, fmt.Errorf("kernel module %s: taint %q, want upper-case flags such as PO", m.Name, m.Taint))
		}
		if m.Version != "" && !versionRE.MatchString(m.Version) {
			errs = append(errs, fmt.Errorf("kernel module %s: malformed version %q", m.Name, m.Version))
		}
	}
	return errs
}

func validateNetdev(d *Netdev, fns map[string]*PCIFunction, netdevs map[string]*Netdev) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("netdev %s: "+format, append([]any{d.Name}, args...)...))
	}
	if d.PCI != "" && fns[d.PCI] == nil {
		add("pci function %s does not exist", d.PCI)
	}
	if d.SubDir != "" && (d.PCI == "" || !nameRE.MatchString(d.SubDir)) {
		add("subdir %q needs a PCI function and a plain name", d.SubDir)
	}
	if d.Bond && d.PCI != "" {
		add("a bond is a virtual interface and has no PCI function")
	}
	if d.Master != "" {
		switch m := netdevs[d.Master]; {
		case m == nil:
			add("master %s does not exist", d.Master)
		case !m.Bond:
			add("master %s is not a bond", d.Master)
		case d.Master == d.Name:
			add("enslaved to itself")
		}
	}
	if d.Type != NetdevTypeEthernet && d.Type != NetdevTypeInfiniBand {
		add("type %d: want 1 (Ethernet) or 32 (IPoIB)", d.Type)
	}
	if d.MTU <= 0 {
		add("mtu %d: want a positive value", d.MTU)
	}
	if !operStates[d.OperState] {
		add("operstate %q is not a kernel operstate", d.OperState)
	}
	if d.DevPort < 0 {
		add("dev_port %d: want 0 or more", d.DevPort)
	}
	if strings.TrimSpace(d.Address) == "" {
		add("missing hardware address")
	}
	return errs
}

func validateRDMADevice(d *RDMADevice, fns map[string]*PCIFunction, netdevs map[string]*Netdev) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("rdma device %s: "+format, append([]any{d.Name}, args...)...))
	}
	switch {
	case d.PCI != "" && d.Parent != "":
		add("parent is for virtual devices only")
	case d.PCI != "" && fns[d.PCI] == nil:
		add("pci function %s does not exist", d.PCI)
	case d.PCI == "" && d.Parent == "":
		add("a virtual device needs a parent netdev")
	case d.PCI == "" && netdevs[d.Parent] == nil:
		add("parent netdev %s does not exist", d.Parent)
	}
	if !guidRE.MatchString(d.NodeGUID) {
		add("malformed node_guid %q", d.NodeGUID)
	}
	if !guidRE.MatchString(d.SysImageGUID) {
		add("malformed sys_image_guid %q", d.SysImageGUID)
	}
	if len(d.Ports) == 0 {
		add("no ports")
	}
	drivers := map[string]string{}
	if f := fns[d.PCI]; f != nil {
		drivers[d.PCI] = f.Driver
	}
	for i := range d.Ports {
		for _, err := range validatePort(&d.Ports[i], i+1, len(d.Ports), netdevs) {
			add("%w", err)
		}
		for _, err := range validateCounters(d, &d.Ports[i], drivers) {
			add("%w", err)
		}
	}
	return errs
}

func validatePort(p *Port, want, count int, netdevs map[string]*Netdev) []error {
	var errs []error
	add := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("port %d: "+format, append([]any{p.Number}, args...)...))
	}
	if p.Number != want {
		add("out of range or out of order: ports are numbered 1..%d in order, this is entry %d", count, want)
	}
	if _, ok := portStates[p.State]; !ok {
		add("unknown state %q", p.State)
	}
	if _, ok := physStates[p.PhysState]; !ok {
		add("unknown phys_state %q", p.PhysState)
	}
	if !linkLayers[p.LinkLayer] {
		add("unknown link layer %q", p.LinkLayer)
	}
	if !rateRE.MatchString(p.Rate) {
		add("malformed rate %q, want e.g. \"400 Gb/sec (4X NDR)\"", p.Rate)
	}
	size := p.gidTableSize()
	if size < 1 {
		add("gid table size %d: want 1 or more", p.GIDTableSize)
	}
	seen := map[int]bool{}
	for _, g := range p.GIDs {
		switch {
		case g.Index < 0 || g.Index >= size:
			add("gid index %d outside the table of %d entries", g.Index, size)
		case seen[g.Index]:
			add("gid index %d listed twice", g.Index)
		case !g.GID.IsValid() || g.GID.IsUnspecified():
			add("gid index %d: a valid entry needs a non-zero GID", g.Index)
		case g.Type != GIDTypeRoCEv1 && g.Type != GIDTypeRoCEv2:
			add("gid index %d: unknown type %q", g.Index, g.Type)
		case p.LinkLayer == "InfiniBand" && g.Ndev != "":
			add("gid index %d: InfiniBand entries have no netdev", g.Index)
		case g.Ndev != "" && netdevs[g.Ndev] == nil:
			add("gid index %d: netdev %s does not exist", g.Index, g.Ndev)
		}
		seen[g.Index] = true
	}
	return errs
}

func (p *Port) gidTableSize() int {
	if p.GIDTableSize == 0 {
		return DefaultGIDTableSize
	}
	return p.GIDTableSize
}

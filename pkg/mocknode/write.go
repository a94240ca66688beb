package mocknode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Names Write creates inside its target directory; it touches nothing else.
const (
	// SysDir is the sysfs root of the mock node: pass DIR/sys as --sysfs-root.
	SysDir = "sys"
	// CharDevsFile lists the character devices to create, see WriteCharDevs.
	CharDevsFile = "chardevs"
)

// WriteOptions tune Write.
type WriteOptions struct {
	// Overwrite allows a non-empty target directory. The previous sys tree and chardevs
	// file are removed first; anything else in the directory is left alone.
	Overwrite bool
}

// WriteProfile writes the node of the named profile below dir, as Node.Write does.
func WriteProfile(profile, dir string, opts WriteOptions) error {
	p, err := Lookup(profile)
	if err != nil {
		return err
	}
	if err := p.Node().Write(dir, opts); err != nil {
		return fmt.Errorf("write mock node %s: %w", profile, err)
	}
	return nil
}

// Write validates n and lays it out below dir: the sysfs tree in dir/sys and the list of
// character devices in dir/chardevs. dir is created if missing; a non-empty dir is refused
// unless opts.Overwrite is set.
func (n *Node) Write(dir string, opts WriteOptions) error {
	if err := n.Validate(); err != nil {
		return fmt.Errorf("validate node: %w", err)
	}
	t, err := n.layout()
	if err != nil {
		return err
	}
	if err := prepareTarget(dir, opts.Overwrite); err != nil {
		return err
	}
	if err := t.writeTo(filepath.Join(dir, SysDir)); err != nil {
		return fmt.Errorf("write sysfs tree: %w", err)
	}
	f, err := os.Create(filepath.Join(dir, CharDevsFile))
	if err != nil {
		return fmt.Errorf("create chardevs file: %w", err)
	}
	if err := n.WriteCharDevs(f); err != nil {
		_ = f.Close()
		return fmt.Errorf("write chardevs file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close chardevs file: %w", err)
	}
	return nil
}

func prepareTarget(dir string, overwrite bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("create target directory: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("read target directory: %w", err)
	case len(entries) == 0:
		return nil
	case !overwrite:
		return fmt.Errorf("target directory %s is not empty (overwrite to replace its mock node)", dir)
	}
	if err := os.RemoveAll(filepath.Join(dir, SysDir)); err != nil {
		return fmt.Errorf("remove previous sysfs tree: %w", err)
	}
	if err := os.Remove(filepath.Join(dir, CharDevsFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove previous chardevs file: %w", err)
	}
	return nil
}

// paths knows where each object of a valid node lives, relative to the sysfs root.
type paths struct {
	fns map[string]*PCIFunction
	nds map[string]*Netdev
}

func newPaths(n *Node) *paths {
	p := &paths{fns: map[string]*PCIFunction{}, nds: map[string]*Netdev{}}
	for i := range n.PCIFunctions {
		p.fns[n.PCIFunctions[i].Address] = &n.PCIFunctions[i]
	}
	for i := range n.Netdevs {
		p.nds[n.Netdevs[i].Name] = &n.Netdevs[i]
	}
	return p
}

// function is devices/<root>/<bridges...>/<bdf>; a VF without its own path sits beside
// its PF.
func (p *paths) function(addr string) string {
	f := p.fns[addr]
	loc := f
	if f.Root == "" && f.PhysFn != "" {
		loc = p.fns[f.PhysFn]
	}
	return path.Join(append(append([]string{"devices", loc.Root}, loc.Bridges...), addr)...)
}

// owner is the directory below which a device of the given class lives: the PCI function,
// or devices/virtual for devices without one.
func (p *paths) owner(pci, class, name string) string {
	if pci == "" {
		return path.Join("devices/virtual", class, name)
	}
	return path.Join(p.function(pci), class, name)
}

func (p *paths) netdev(name string) string {
	d := p.nds[name]
	if d.PCI == "" {
		return path.Join("devices/virtual/net", name)
	}
	return path.Join(p.function(d.PCI), d.SubDir, "net", name)
}

// layout builds the whole sysfs tree of a valid node in memory.
func (n *Node) layout() (*tree, error) {
	t := newTree()
	p := newPaths(n)
	for _, class := range []string{"class/infiniband", "class/infiniband_verbs", "class/infiniband_mad", "class/net", "bus/pci/devices", "bus/pci/drivers"} {
		t.dir(class)
	}
	// The class-wide ABI files of the uverbs and umad interfaces: real class directories
	// hold these next to the device links, and readers must cope with them.
	t.file("class/infiniband_verbs/abi_version", "6")
	t.file("class/infiniband_mad/abi_version", "5")

	mode := n.NetnsMode
	if mode == "" {
		mode = "Y"
	}
	t.file("module/ib_core/parameters/netns_mode", mode)
	cm := path.Join("devices/virtual/misc", rdmaCMName)
	t.file(path.Join(cm, "dev"), fmt.Sprintf("%d:%d", miscMajor, rdmaCMMinor))
	t.link(path.Join("class/misc", rdmaCMName), cm)

	n.layoutFunctions(t, p)
	n.layoutGPUs(t)
	n.layoutPlatform(t)
	n.layoutModules(t)
	n.layoutNetdevs(t, p)
	n.layoutRDMA(t, p)
	return t, t.err
}

// layoutGPUs writes each GPU as a PCI function of its own.
func (n *Node) layoutGPUs(t *tree) {
	for _, g := range n.GPUs {
		dir := path.Join(append(append([]string{"devices", g.Root}, g.Bridges...), g.Address)...)
		t.link(path.Join("bus/pci/devices", g.Address), dir)
		class := g.Class
		if class == 0 {
			class = ClassGPU
		}
		t.file(path.Join(dir, "vendor"), fmt.Sprintf("0x%04x", VendorNVIDIA))
		t.file(path.Join(dir, "device"), fmt.Sprintf("0x%04x", g.Device))
		t.file(path.Join(dir, "subsystem_vendor"), fmt.Sprintf("0x%04x", VendorNVIDIA))
		t.file(path.Join(dir, "subsystem_device"), fmt.Sprintf("0x%04x", g.SubsystemDevice))
		t.file(path.Join(dir, "class"), fmt.Sprintf("0x%06x", class))
		t.file(path.Join(dir, "numa_node"), strconv.Itoa(g.NUMANode))
		layoutLink(t, dir, g.Link)
		if g.Driver != "" {
			drv := path.Join("bus/pci/drivers", g.Driver)
			t.dir(drv)
			t.link(path.Join(dir, "driver"), drv)
			t.link(path.Join(drv, g.Address), dir)
		}
	}
}

// layoutModules writes module/<name> of each loaded module: initstate, taint and, where
// known, version, as the kernel has them for a loaded module.
func (n *Node) layoutModules(t *tree) {
	for _, m := range n.KernelModules {
		dir := path.Join("module", m.Name)
		t.file(path.Join(dir, "initstate"), "live")
		t.file(path.Join(dir, "taint"), m.Taint)
		if m.Version != "" {
			t.file(path.Join(dir, "version"), m.Version)
		}
	}
}

func (n *Node) layoutFunctions(t *tree, p *paths) {
	vfs := map[string][]string{}
	for _, f := range n.PCIFunctions {
		if f.PhysFn != "" {
			vfs[f.PhysFn] = append(vfs[f.PhysFn], f.Address)
		}
	}
	for _, f := range n.PCIFunctions {
		dir := p.function(f.Address)
		t.link(path.Join("bus/pci/devices", f.Address), dir)
		t.file(path.Join(dir, "vendor"), fmt.Sprintf("0x%04x", f.Vendor))
		t.file(path.Join(dir, "device"), fmt.Sprintf("0x%04x", f.Device))
		t.file(path.Join(dir, "subsystem_vendor"), fmt.Sprintf("0x%04x", f.SubsystemVendor))
		t.file(path.Join(dir, "subsystem_device"), fmt.Sprintf("0x%04x", f.SubsystemDevice))
		t.file(path.Join(dir, "class"), fmt.Sprintf("0x%06x", f.Class))
		t.file(path.Join(dir, "numa_node"), strconv.Itoa(f.NUMANode))
		layoutLink(t, dir, f.Link)
		if f.Driver != "" {
			drv := path.Join("bus/pci/drivers", f.Driver)
			t.dir(drv)
			t.link(path.Join(dir, "driver"), drv)
			t.link(path.Join(drv, f.Address), dir)
		}
		if f.PhysFn != "" {
			t.link(path.Join(dir, "physfn"), p.function(f.PhysFn))
		}
		if f.VPD != nil {
			t.raw(path.Join(dir, "vpd"), f.VPD.Bytes())
		}
		if list := vfs[f.Address]; len(list) > 0 {
			// Fixed-width lower-case bus IDs sort like their numeric values, which is
			// the order in which the kernel numbers VFs.
			slices.Sort(list)
			for i, vf := range list {
				t.link(path.Join(dir, "virtfn"+strconv.Itoa(i)), p.function(vf))
			}
			t.file(path.Join(dir, "sriov_numvfs"), strconv.Itoa(len(list)))
			t.file(path.Join(dir, "sriov_totalvfs"), strconv.Itoa(len(list)))
		}
	}
}

func (n *Node) layoutNetdevs(t *tree, p *paths) {
	slaves := map[string][]string{}
	for _, d := range n.Netdevs {
		if d.Master != "" {
			slaves[d.Master] = append(slaves[d.Master], d.Name)
		}
	}
	for _, d := range n.Netdevs {
		dir := p.netdev(d.Name)
		t.link(path.Join("class/net", d.Name), dir)
		t.file(path.Join(dir, "address"), d.Address)
		t.file(path.Join(dir, "mtu"), strconv.Itoa(d.MTU))
		t.file(path.Join(dir, "operstate"), d.OperState)
		carrier := d.OperState == "up"
		if d.Carrier != nil {
			carrier = *d.Carrier
		}
		t.file(path.Join(dir, "carrier"), map[bool]string{true: "1", false: "0"}[carrier])
		t.file(path.Join(dir, "type"), strconv.Itoa(d.Type))
		t.file(path.Join(dir, "dev_port"), strconv.Itoa(d.DevPort))
		if d.PCI != "" {
			t.link(path.Join(dir, "device"), path.Join(p.function(d.PCI), d.SubDir))
		}
		if d.Master != "" {
			t.link(path.Join(dir, "master"), p.netdev(d.Master))
		}
		if d.Bond {
			t.file(path.Join(dir, "bonding/slaves"), strings.Join(slaves[d.Name], " "))
		}
	}
}

func (n *Node) layoutRDMA(t *tree, p *paths) {
	for _, c := range n.CharDevs() {
		if c.IBDev == "" {
			continue // rdma_cm is node-wide, laid out with the module
		}
		d := n.rdmaDevice(c.IBDev)
		class := "infiniband_verbs"
		if c.Kind != CharDevVerbs {
			class = "infiniband_mad"
		}
		dir := p.owner(d.PCI, class, c.Name)
		t.link(path.Join("class", class, c.Name), dir)
		t.file(path.Join(dir, "ibdev"), d.Name)
		t.file(path.Join(dir, "dev"), fmt.Sprintf("%d:%d", c.Major, c.Minor))
		if c.Kind != CharDevVerbs {
			t.file(path.Join(dir, "port"), strconv.Itoa(c.Port))
		}
		if d.PCI != "" {
			t.link(path.Join(dir, "device"), p.function(d.PCI))
		}
	}
	drivers := make(map[string]string, len(n.PCIFunctions))
	for _, f := range n.PCIFunctions {
		drivers[f.Address] = f.Driver
	}
	for i := range n.RDMADevices {
		d := &n.RDMADevices[i]
		dir := p.owner(d.PCI, "infiniband", d.Name)
		t.link(path.Join("class/infiniband", d.Name), dir)
		if d.PCI != "" {
			t.link(path.Join(dir, "device"), p.function(d.PCI))
		} else {
			t.file(path.Join(dir, "parent"), d.Parent)
		}
		t.file(path.Join(dir, "node_guid"), d.NodeGUID)
		t.file(path.Join(dir, "sys_image_guid"), d.SysImageGUID)
		t.file(path.Join(dir, "fw_ver"), d.FWVer)
		if d.BoardID != "" {
			t.file(path.Join(dir, "board_id"), d.BoardID)
		}
		if d.HCAType != "" {
			t.file(path.Join(dir, "hca_type"), d.HCAType)
		}
		nodeType := d.NodeType
		if nodeType == "" {
			nodeType = "1: CA"
		}
		t.file(path.Join(dir, "node_type"), nodeType)
		for j := range d.Ports {
			portDir := path.Join(dir, "ports", strconv.Itoa(d.Ports[j].Number))
			layoutPort(t, portDir, &d.Ports[j])
			layoutCounters(t, portDir, d, &d.Ports[j], drivers)
		}
	}
}

func layoutPort(t *tree, dir string, p *Port) {
	t.file(path.Join(dir, "state"), fmt.Sprintf("%d: %s", portStates[p.State], p.State))
	t.file(path.Join(dir, "phys_state"), fmt.Sprintf("%d: %s", physStates[p.PhysState], p.PhysState))
	t.file(path.Join(dir, "rate"), p.Rate)
	t.file(path.Join(dir, "link_layer"), p.LinkLayer)
	t.file(path.Join(dir, "lid"), fmt.Sprintf("0x%x", p.LID))
	t.file(path.Join(dir, "sm_lid"), fmt.Sprintf("0x%x", p.SMLID))
	valid := map[int]GID{}
	for _, g := range p.GIDs {
		valid[g.Index] = g
	}
	// The attribute directories exist even when every entry is unused; the files of
	// unused entries are left out because reading them fails on a real node.
	t.dir(path.Join(dir, "gid_attrs/types"))
	t.dir(path.Join(dir, "gid_attrs/ndevs"))
	for i := 0; i < p.gidTableSize(); i++ {
		idx := strconv.Itoa(i)
		g, ok := valid[i]
		if !ok {
			t.file(path.Join(dir, "gids", idx), FormatGID([16]byte{}))
			continue
		}
		t.file(path.Join(dir, "gids", idx), FormatGID(g.GID.As16()))
		t.file(path.Join(dir, "gid_attrs/types", idx), g.Type)
		if g.Ndev != "" {
			t.file(path.Join(dir, "gid_attrs/ndevs", idx), g.Ndev)
		}
	}
	pkeys := p.PKeys
	if pkeys == nil {
		pkeys = []uint16{0xffff}
	}
	for i, k := range pkeys {
		t.file(path.Join(dir, "pkeys", strconv.Itoa(i)), fmt.Sprintf("0x%04x", k))
	}
}

func (n *Node) rdmaDevice(name string) *RDMADevice {
	for i := range n.RDMADevices {
		if n.RDMADevices[i].Name == name {
			return &n.RDMADevices[i]
		}
	}
	return nil
}

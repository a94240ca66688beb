// Package mocknode writes trees that mimic the sysfs of a node with RDMA adapters, laid out
// exactly as the project's sysfs contract (sysfs.md) describes, so that discovery, the CLI,
// the kubelet plugin and the local cluster can run against InfiniBand and RoCE hardware
// that is not there.
//
// A node is described declaratively (Node), checked (Node.Validate) and written below a
// directory (Node.Write): DIR/sys/... plus DIR/chardevs, the list of character devices the
// local-cluster tooling creates with mknod. Named, realistic nodes come from Profiles.
//
// Everything is derived from the description alone, so writing the same Node twice gives
// byte-identical trees.
package mocknode

import "net/netip"

// Node is the declarative description of one mock node.
//
// Order matters in two places, as it does on a real host: RDMADevices are numbered in the
// order given (uverbsN, and umadN/issmN per port that has MADs), and the VFs of a PF are
// numbered (virtfnN) in the order of their PCI addresses.
type Node struct {
	// NetnsMode is the ib_core netns_mode parameter: "Y" (shared, the kernel default) or
	// "N" (exclusive). Empty means "Y".
	NetnsMode string `json:"netnsMode,omitempty"`
	// PCIFunctions are the node's PCI functions that carry RDMA devices or their netdevs.
	PCIFunctions []PCIFunction `json:"pciFunctions,omitempty"`
	// RDMADevices are the node's RDMA devices (class/infiniband).
	RDMADevices []RDMADevice `json:"rdmaDevices,omitempty"`
	// Netdevs are the node's network interfaces, bonds included.
	Netdevs []Netdev `json:"netdevs,omitempty"`
	// GPUs are the node's GPUs: PCI functions laid out as PCIFunctions are, apart from
	// them because no RDMA device or netdev belongs to a GPU.
	GPUs []GPU `json:"gpus,omitempty"`
	// KernelModules are loaded modules that get a module/<name> directory besides
	// ib_core's, e.g. the NVIDIA driver (nvidia) and nvidia_peermem.
	KernelModules []KernelModule `json:"kernelModules,omitempty"`
	// Platform is the machine around the devices: CPUs, NUMA nodes and the PCI bridges on
	// the paths to the functions and GPUs (platform.go). Nil leaves all of that out, as
	// trees that only discovery reads can.
	Platform *Platform `json:"platform,omitempty"`
}

// PCIFunction is one PCI function, for example one port of a ConnectX-7 or one of its VFs.
type PCIFunction struct {
	// Address is the bus ID, e.g. 0000:03:00.0 (lower-case hex, fully written out).
	Address string `json:"address"`
	// Root is the PCIe root complex directory below devices/, e.g. pci0000:00. Its domain
	// must be the function's. May be empty on a VF, which then inherits its PF's path.
	Root string `json:"root,omitempty"`
	// Bridges are the bus IDs of the bridges between the root and the function, outermost
	// first, e.g. a root port and the ports of a PCIe switch. May be empty on a VF.
	Bridges []string `json:"bridges,omitempty"`

	// Vendor, Device, SubsystemVendor and SubsystemDevice are the PCI IDs.
	Vendor          uint16 `json:"vendor"`
	Device          uint16 `json:"device"`
	SubsystemVendor uint16 `json:"subsystemVendor"`
	SubsystemDevice uint16 `json:"subsystemDevice"`
	// Class is the 24-bit PCI class, e.g. 0x020700 (InfiniBand) or 0x020000 (Ethernet).
	Class uint32 `json:"class"`
	// NUMANode is the function's NUMA node, -1 when the platform does not say.
	NUMANode int `json:"numaNode"`
	// Driver is the bound kernel driver, e.g. mlx5_core; empty for an unbound function.
	Driver string `json:"driver,omitempty"`
	// PhysFn is the PF's address on an SR-IOV virtual function, empty otherwise.
	PhysFn string `json:"physFn,omitempty"`
	// VPD is the content of the function's vpd file; nil leaves the file out, as on a
	// function without the VPD capability.
	VPD *VPD `json:"vpd,omitempty"`
	// Link is the PCIe link the function is built for (max_link_speed, max_link_width);
	// the zero Link leaves both files out, as on a device without a PCIe link.
	Link Link `json:"link,omitzero"`
}

// VPD is what a PCI function's Vital Product Data holds: an identifier string and a
// read-only section of keywords, laid out as NVIDIA adapters lay theirs out (lspci -vv
// shows the same keywords), with the checksum keyword RV last. Empty keywords are left
// out.
type VPD struct {
	// ProductName is the identifier string.
	ProductName string `json:"productName"`
	// PartNumber is keyword PN.
	PartNumber string `json:"partNumber,omitempty"`
	// SerialNumber is keyword SN, the board's serial number.
	SerialNumber string `json:"serialNumber,omitempty"`
	// UUID is keyword V3, 32 lower-case hex digits: the same in every PCI function of
	// one adapter, its Data Direct function included, which is how sysfs.md pairs them.
	UUID string `json:"uuid,omitempty"`
	// FunctionID is keyword VU, an ID of the function itself.
	FunctionID string `json:"functionID,omitempty"`
}

// GPU is one GPU's PCI function: a device directory below devices/<root>/<bridges...>,
// linked from bus/pci/devices, with vendor 0x10de, and bound to its driver.
type GPU struct {
	// Address is the bus ID, e.g. 0000:1b:00.0.
	Address string `json:"address"`
	// Root is the PCIe root complex directory below devices/, e.g. pci0000:15.
	Root string `json:"root"`
	// Bridges are the bus IDs of the bridges between the root and the GPU, outermost
	// first.
	Bridges []string `json:"bridges,omitempty"`
	// Device and SubsystemDevice are NVIDIA's PCI IDs of the GPU.
	Device          uint16 `json:"device"`
	SubsystemDevice uint16 `json:"subsystemDevice"`
	// Class is the 24-bit PCI class, a display controller (0x03xxxx); 0 means
	// ClassGPU, what data-center GPUs report.
	Class uint32 `json:"class,omitempty"`
	// NUMANode is the GPU's NUMA node, -1 when the platform does not say.
	NUMANode int `json:"numaNode"`
	// Driver is the bound kernel driver, nvidia; empty for an unbound GPU.
	Driver string `json:"driver,omitempty"`
	// Link is the PCIe link the GPU is built for, as PCIFunction.Link.
	Link Link `json:"link,omitzero"`
}

// ClassGPU is the PCI class of a 3D controller, what data-center GPUs report.
const ClassGPU = 0x030200

// VendorNVIDIA is NVIDIA's PCI vendor ID, that of its GPUs.
const VendorNVIDIA = 0x10de

// KernelModule is one loaded kernel module with a module/<name> directory.
type KernelModule struct {
	// Name is the module's name, e.g. nvidia or nvidia_peermem.
	Name string `json:"name"`
	// Taint is module/<name>/taint: the taint flags the module gives the kernel, e.g.
	// PO for NVIDIA's proprietary driver (P proprietary licence, O out of tree), O for
	// its open kernel modules; empty for an untainting module.
	Taint string `json:"taint"`
	// Version is module/<name>/version; empty leaves the file out.
	Version string `json:"version,omitempty"`
}

// RDMADevice is one RDMA device (ibdev), for example mlx5_0, mlx5_bond_0 or rxe0.
type RDMADevice struct {
	// Name is the ibdev name.
	Name string `json:"name"`
	// PCI is the address of the PCI function the device belongs to; empty for a virtual
	// device (rxe, siw), which then needs Parent.
	PCI string `json:"pci,omitempty"`
	// Parent is the netdev a virtual device runs over, e.g. eth0; virtual devices only.
	Parent string `json:"parent,omitempty"`

	// NodeGUID and SysImageGUID are written as given, e.g. 7c8c:0903:00c3:cfee (see GUID).
	NodeGUID     string `json:"nodeGUID"`
	SysImageGUID string `json:"sysImageGUID"`
	// FWVer is the firmware version text.
	FWVer string `json:"fwVer"`
	// BoardID and HCAType are free text. Empty means the driver does not provide the
	// file (rxe, irdma), so it is left out rather than written empty.
	BoardID string `json:"boardID,omitempty"`
	HCAType string `json:"hcaType,omitempty"`
	// NodeType is the node_type text; empty means "1: CA".
	NodeType string `json:"nodeType,omitempty"`
	// NoMAD marks adapters without MAD support (Intel irdma, iWARP): no umad or issm
	// devices at all.
	NoMAD bool `json:"noMAD,omitempty"`

	// Ports are numbered 1..len(Ports), in that order.
	Ports []Port `json:"ports"`
}

// Port is one port of an RDMA device.
type Port struct {
	// Number is the 1-based port number; it must equal the port's position in the list.
	Number int `json:"number"`
	// State is the logical state name (NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER); the
	// numeric code is added when written.
	State string `json:"state"`
	// PhysState is the physical state name (Sleep, Polling, Disabled,
	// PortConfigurationTraining, LinkUp, LinkErrorRecovery, Phy Test).
	PhysState string `json:"physState"`
	// Rate is the rate text, e.g. "400 Gb/sec (4X NDR)".
	Rate string `json:"rate"`
	// LinkLayer is InfiniBand, Ethernet or Unknown.
	LinkLayer string `json:"linkLayer"`
	// LID and SMLID are the port's and the subnet manager's LIDs (0 on Ethernet).
	LID   uint16 `json:"lid,omitempty"`
	SMLID uint16 `json:"smLID,omitempty"`
	// GIDTableSize is the number of gids/<i> files; 0 means DefaultGIDTableSize. Entries
	// not in GIDs read as all zeros.
	GIDTableSize int `json:"gidTableSize,omitempty"`
	// GIDs are the valid entries of the GID table, in any order; the table may be sparse.
	GIDs []GID `json:"gids,omitempty"`
	// PKeys is the P_Key table; nil means the default table, a single 0xffff.
	PKeys []uint16 `json:"pkeys,omitempty"`
	// Counters sets the values of the port's counter files, by file name
	// (link_downed, port_xmit_data, np_cnp_sent); each must be a file the port's
	// driver has (counters.go) and fit its width. The others get plausible values
	// derived from the port's name.
	Counters map[string]uint64 `json:"counters,omitempty"`
}

// DefaultGIDTableSize is the GID table length written when a port does not say. Real
// adapters have 128 to 256 entries; fixtures keep tables short so that large nodes stay
// cheap to write, and discovery must not care about the length anyway.
const DefaultGIDTableSize = 16

// GID is one valid entry of a port's GID table.
type GID struct {
	// Index is the entry's index in the table.
	Index int `json:"index"`
	// GID is the 128-bit GID; IPv4 addresses are written IPv4-mapped (::ffff:a.b.c.d).
	GID netip.Addr `json:"gid"`
	// Type is GIDTypeRoCEv1 ("IB/RoCE v1", also used by InfiniBand) or GIDTypeRoCEv2.
	Type string `json:"type"`
	// Ndev is the netdev the entry belongs to; empty on InfiniBand ports.
	Ndev string `json:"ndev,omitempty"`
}

// GID types as the kernel spells them in gid_attrs/types.
const (
	GIDTypeRoCEv1 = "IB/RoCE v1"
	GIDTypeRoCEv2 = "RoCE v2"
)

// Netdev is one network interface: an IPoIB or Ethernet interface of a PCI function, or a
// virtual interface such as a bond.
type Netdev struct {
	// Name is the interface name.
	Name string `json:"name"`
	// PCI is the address of the interface's PCI function; empty for a virtual interface
	// (devices/virtual/net), which bonds always are.
	PCI string `json:"pci,omitempty"`
	// SubDir is a device directory between the PCI function and net/, e.g. virtio0 for
	// virtio-net, whose interfaces live below the virtio device; usually empty.
	SubDir string `json:"subDir,omitempty"`
	// Address is the hardware address: a MAC, or the 20-byte IPoIB address.
	Address string `json:"address"`
	// MTU is the interface MTU.
	MTU int `json:"mtu"`
	// OperState is the RFC 2863 state as the kernel writes it: up, down, lowerlayerdown...
	OperState string `json:"operState"`
	// Carrier overrides the carrier file; nil means 1 when OperState is up, else 0.
	Carrier *bool `json:"carrier,omitempty"`
	// Type is the ARPHRD type: 1 Ethernet, 32 IPoIB.
	Type int `json:"type"`
	// DevPort is the 0-based port of a multi-port function (dev_port).
	DevPort int `json:"devPort"`
	// Master is the bond this interface is enslaved to, empty if none.
	Master string `json:"master,omitempty"`
	// Bond marks a bonding master; its slaves are the netdevs whose Master names it, in
	// the order they are listed.
	Bond bool `json:"bond,omitempty"`
}

// ARPHRD types written to class/net/<if>/type.
const (
	NetdevTypeEthernet   = 1
	NetdevTypeInfiniBand = 32
)

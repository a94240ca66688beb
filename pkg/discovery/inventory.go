// Package discovery builds the node's inventory of RDMA ports from sysfs (and, on a live
// host, netlink). The inventory is the single input of the device model, the CLI and the
// kubelet plugin: everything the driver knows about the hardware is in these types.
package discovery

// Link layers as the kernel spells them in ports/<p>/link_layer.
const (
	LinkLayerInfiniBand = "InfiniBand"
	LinkLayerEthernet   = "Ethernet"
	LinkLayerUnknown    = "Unknown"
)

// NetnsMode is the node's RDMA network namespace mode.
type NetnsMode string

// RDMA network namespace modes; NetnsModeUnknown when neither netlink nor the module
// parameter could tell.
const (
	NetnsModeShared    NetnsMode = "shared"
	NetnsModeExclusive NetnsMode = "exclusive"
	NetnsModeUnknown   NetnsMode = ""
)

// Inventory is everything discovery found on one node.
//
// Invariant: Ports is sorted by (IBDev, Port) and holds each pair once, so that the same
// hardware always yields the same inventory and the published slices do not churn.
type Inventory struct {
	// NetnsMode is the RDMA subsystem's network namespace mode of the node.
	NetnsMode NetnsMode `json:"netnsMode,omitempty"`
	// Ports lists every port of every RDMA device, sorted.
	Ports []Port `json:"ports"`
}

// Port is one port of one RDMA device, the unit the driver publishes and allocates.
//
// Facts that could not be read (missing or garbled files) are left at their zero value for
// strings and nil for pointers; nil always means "unknown or does not apply", never zero.
type Port struct {
	// IBDev is the RDMA device name (class/infiniband/<ibdev>), e.g. mlx5_0 or mlx5_bond_0.
	IBDev string `json:"ibdev"`
	// Port is the 1-based port number.
	Port int `json:"port"`

	// LinkLayer is LinkLayerInfiniBand, LinkLayerEthernet or LinkLayerUnknown.
	LinkLayer string `json:"linkLayer"`
	// State is the logical port state name: NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER.
	State string `json:"state"`
	// PhysState is the physical state name: Sleep, Polling, Disabled, LinkUp, ...
	PhysState string `json:"physState"`
	// SpeedGbps is the port rate in whole Gb/s.
	SpeedGbps *int `json:"speedGbps,omitempty"`
	// Rate is the raw rate text, e.g. "400 Gb/sec (4X NDR)".
	Rate string `json:"rate,omitempty"`

	// Netdev is the port's network interface: the bond master for LAG and bonded RoCE
	// ports, the IPoIB interface for InfiniBand, the parent for soft-RoCE; empty if none.
	Netdev string `json:"netdev,omitempty"`
	// MTU is the netdev's MTU.
	MTU *int `json:"mtu,omitempty"`
	// GIDIndex is the RoCE GID index NCCL should use (sysfs.md rule); nil for InfiniBand
	// and for RoCE ports without a usable entry.
	GIDIndex *int `json:"gidIndex,omitempty"`

	// NodeGUID, FWVer, BoardID and HCAType are the device's files of the same names.
	NodeGUID string `json:"nodeGUID,omitempty"`
	FWVer    string `json:"fwVer,omitempty"`
	BoardID  string `json:"boardID,omitempty"`
	HCAType  string `json:"hcaType,omitempty"`
	// Model is a marketing name derived from the PCI IDs, e.g. ConnectX-7; empty if unknown.
	Model string `json:"model,omitempty"`

	// VendorID and DeviceID are the PCI IDs as four lower-case hex digits without 0x.
	VendorID string `json:"vendorID,omitempty"`
	DeviceID string `json:"deviceID,omitempty"`
	// Driver is the PCI function's kernel driver, e.g. mlx5_core.
	Driver string `json:"driver,omitempty"`
	// PCIBusID is the PCI function's address, e.g. 0000:03:00.0; empty for virtual devices.
	PCIBusID string `json:"pciBusID,omitempty"`
	// PCIeRoot is the PCIe root complex, e.g. pci0000:00; empty for virtual devices.
	PCIeRoot string `json:"pcieRoot,omitempty"`
	// NUMANode is the PCI function's NUMA node; nil when unknown (-1 in sysfs).
	NUMANode *int `json:"numaNode,omitempty"`
	// SRIOVVF is true for an SR-IOV virtual function; PhysFn is then its PF's bus ID.
	SRIOVVF bool   `json:"sriovVF"`
	PhysFn  string `json:"physFn,omitempty"`
	// LAG is true for a hardware LAG device (mlx5_bond_N) and for a port whose netdev is
	// enslaved to a bond.
	LAG bool `json:"lag"`
	// Virtual is true for devices without a PCI function (rxe, siw).
	Virtual bool `json:"virtual"`

	// Verbs is the uverbs character device of the port's RDMA device (shared by its ports).
	Verbs *CharDev `json:"verbs,omitempty"`
	// UMAD and ISSM are the port's MAD devices; nil on adapters without MAD support.
	UMAD *CharDev `json:"umad,omitempty"`
	ISSM *CharDev `json:"issm,omitempty"`
}

// CharDev is one character device below /dev/infiniband.
type CharDev struct {
	// Name is the node's name below /dev/infiniband, e.g. uverbs0, umad3, issm3.
	Name string `json:"name"`
	// Major and Minor are the device numbers from the class device's dev file.
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// Package discovery builds the node's inventory of RDMA ports from sysfs (and, on a live
// host, netlink). The inventory is the single input of the device model, the CLI and the
// kubelet plugin: everything the driver knows about the hardware is in these types.
package discovery

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/internal/natsort"
)

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
// Invariant: Ports is sorted by ComparePorts (natural order of IBDev, then Port) and
// holds each pair once, so that the same
// hardware always yields the same inventory and the published slices do not churn.
type Inventory struct {
	// NetnsMode is the RDMA subsystem's network namespace mode of the node.
	NetnsMode NetnsMode `json:"netns_mode,omitempty"`
	// Ports lists every port of every RDMA device, sorted.
	Ports []Port `json:"ports"`
}

// Port is one port of one RDMA device, the unit the driver publishes and allocates.
//
// It is the one description of what the driver reports about a port: the inventory
// document (rdma-dra discover -o json) is its JSON, the claim status data of the kubelet
// plugin takes some of its fields under the same keys, and mock nodes state their
// expectations in it (mocknode.Node.ExpectedPorts). Its JSON keys that name a fact the
// device model publishes are that attribute's name (devicemodel.AttrIBDev ...).
//
// Facts that could not be read (missing or garbled files) are left at their zero value for
// strings and nil for pointers; nil always means "unknown or does not apply", never zero.
type Port struct {
	// IBDev is the RDMA device name (class/infiniband/<ibdev>), e.g. mlx5_0 or mlx5_bond_0.
	IBDev string `json:"ibdev"`
	// Port is the 1-based port number.
	Port int `json:"port"`

	// LinkLayer is LinkLayerInfiniBand, LinkLayerEthernet or LinkLayerUnknown.
	LinkLayer string `json:"link_layer"`
	// State is the logical port state name: NOP, DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER.
	State string `json:"port_state,omitempty"`
	// PhysState is the physical state name: Sleep, Polling, Disabled, LinkUp, ...
	PhysState string `json:"phys_state,omitempty"`
	// SpeedGbps is the port rate in whole Gb/s.
	SpeedGbps *int `json:"speed_gbps,omitempty"`
	// Rate is the raw rate text, e.g. "400 Gb/sec (4X NDR)".
	Rate string `json:"rate,omitempty"`

	// Netdev is the port's network interface: the bond master for LAG and bonded RoCE
	// ports, the IPoIB interface for InfiniBand, the parent for soft-RoCE; empty if none.
	Netdev string `json:"netdev,omitempty"`
	// MTU is the netdev's MTU.
	MTU *int `json:"mtu,omitempty"`
	// NetdevOperState is the netdev's operstate (up, down, lowerlayerdown, ...).
	NetdevOperState string `json:"netdev_operstate,omitempty"`

	// LID and SMLID are the port's and its subnet manager's LIDs (InfiniBand only;
	// nil on Ethernet, where the kernel reports 0).
	LID   *int `json:"lid,omitempty"`
	SMLID *int `json:"sm_lid,omitempty"`
	// PortGUID is the interface ID of GID 0 (what ibstat calls the port GUID), in
	// the node_guid notation; empty when GID 0 is unset or unreadable.
	PortGUID string `json:"port_guid,omitempty"`
	// GIDIndex is the RoCE GID index NCCL should use (sysfs.md rule); nil for InfiniBand
	// and for RoCE ports without a usable entry.
	GIDIndex *int `json:"gid_index,omitempty"`

	// NodeGUID, FWVer, BoardID and HCAType are the device's files of the same names.
	NodeGUID string `json:"node_guid,omitempty"`
	FWVer    string `json:"fw_ver,omitempty"`
	BoardID  string `json:"board_id,omitempty"`
	HCAType  string `json:"hca_type,omitempty"`
	// Model is a marketing name derived from the PCI IDs, e.g. ConnectX-7; empty if unknown.
	Model string `json:"model,omitempty"`

	// VendorID and DeviceID are the PCI IDs as four lower-case hex digits without 0x.
	VendorID string `json:"vendor_id,omitempty"`
	DeviceID string `json:"device_id,omitempty"`
	// Driver is the PCI function's kernel driver, e.g. mlx5_core.
	Driver string `json:"driver,omitempty"`
	// PCIBusID is the PCI function's address, e.g. 0000:03:00.0; empty for virtual devices.
	PCIBusID string `json:"pci_bus_id,omitempty"`
	// PCIeRoot is the PCIe root complex, e.g. pci0000:00; empty for virtual devices.
	PCIeRoot string `json:"pcie_root,omitempty"`
	// DataDirectBusID and DataDirectPCIeRoot are the adapter's Data Direct PCI function
	// (ConnectX-8 and later) and its root complex: the function the adapter's DMA goes
	// through, on the accelerator's side of the PCIe topology. Empty when it has none.
	DataDirectBusID    string `json:"data_direct_pci_bus_id,omitempty"`
	DataDirectPCIeRoot string `json:"data_direct_pcie_root,omitempty"`
	// GPUDirect is how the node can register GPU memory with the port for GPUDirect
	// RDMA: GPUDirectDMABuf, GPUDirectPeermem, or empty for neither.
	GPUDirect string `json:"gpudirect,omitempty"`
	// NUMANode is the PCI function's NUMA node; nil when unknown (-1 in sysfs).
	NUMANode *int `json:"numa_node,omitempty"`
	// SRIOVVF is true for an SR-IOV virtual function; PhysFn is then its PF's bus ID.
	SRIOVVF bool   `json:"sriov_vf"`
	PhysFn  string `json:"physfn,omitempty"`
	// LAG is true for a hardware LAG device (mlx5_bond_N) and for a port whose netdev is
	// enslaved to a bond.
	LAG bool `json:"lag"`
	// Virtual is true for devices without a PCI function (rxe, siw).
	Virtual bool `json:"virtual"`

	// Verbs is the uverbs character device of the port's RDMA device (shared by its ports).
	Verbs *CharDev `json:"uverbs,omitempty"`
	// UMAD and ISSM are the port's MAD devices; nil on adapters without MAD support.
	UMAD *CharDev `json:"umad,omitempty"`
	ISSM *CharDev `json:"issm,omitempty"`
}

// The ways GPU memory reaches an RDMA port (Port.GPUDirect).
const (
	// GPUDirectDMABuf: the kernel's dma-buf, with NVIDIA's open kernel modules.
	GPUDirectDMABuf = "dmabuf"
	// GPUDirectPeermem: the nvidia_peermem module's peer-memory client.
	GPUDirectPeermem = "peermem"
)

// CharDev is one character device below /dev/infiniband.
type CharDev struct {
	// Name is the node's name below /dev/infiniband, e.g. uverbs0, umad3, issm3.
	Name string `json:"name"`
	// Major and Minor are the device numbers from the class device's dev file.
	Major uint32 `json:"major"`
	Minor uint32 `json:"minor"`
}

// InventoryVersion is the version of the inventory document: what rdma-dra discover -o
// json writes and rdma-dra slices --inventory reads. docs/inventory.schema.json
// describes it; a change of a key or type needs a new version.
const InventoryVersion = "rdma.dra.io/inventory/v1"

// Document is the inventory as a versioned document. Keys are the device model's
// attribute names in snake case (pkg/devicemodel's tests check them against its
// constants); a key that is absent means unknown or not applicable.
type Document struct {
	// Version is InventoryVersion.
	Version string `json:"version"`
	Inventory
}

// MarshalInventory encodes inv as an indented, versioned JSON document.
func MarshalInventory(inv *Inventory) ([]byte, error) {
	doc := Document{Version: InventoryVersion, Inventory: *inv}
	if doc.Ports == nil {
		doc.Ports = []Port{}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode inventory: %w", err)
	}
	return append(b, '\n'), nil
}

// UnmarshalInventory decodes a document MarshalInventory wrote: strictly (an unknown key
// is an error, with its name) and only of InventoryVersion. Ports are put in the
// Inventory's order.
func UnmarshalInventory(data []byte) (*Inventory, error) {
	var head struct {
		Version *string `json:"version"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return nil, fmt.Errorf("decode inventory: %w", err)
	}
	switch {
	case head.Version == nil:
		return nil, fmt.Errorf("decode inventory: no version; want %q as written by rdma-dra discover -o json", InventoryVersion)
	case *head.Version != InventoryVersion:
		return nil, fmt.Errorf("decode inventory: version %q, want %q", *head.Version, InventoryVersion)
	}
	var doc Document
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode inventory: %w", err)
	}
	if doc.Ports == nil {
		doc.Ports = []Port{}
	}
	SortPorts(doc.Ports)
	for i := 1; i < len(doc.Ports); i++ {
		if a, b := doc.Ports[i-1], doc.Ports[i]; a.IBDev == b.IBDev && a.Port == b.Port {
			return nil, fmt.Errorf("decode inventory: port %s/%d listed twice", a.IBDev, a.Port)
		}
	}
	inv := doc.Inventory
	return &inv, nil
}

// SortPorts sorts ports in the Inventory's order, ComparePorts.
func SortPorts(ports []Port) {
	slices.SortFunc(ports, ComparePorts)
}

// ComparePorts orders ports by IBDev in natural order (mlx5_2 before mlx5_10, as a
// person reads them), then by port number.
func ComparePorts(a, b Port) int {
	return cmp.Or(natsort.Compare(a.IBDev, b.IBDev), cmp.Compare(a.Port, b.Port))
}

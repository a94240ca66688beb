package devicemodel

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// AttributeType is the value type of a device attribute.
type AttributeType string

// The attribute value types the model uses.
const (
	TypeString AttributeType = "string"
	TypeInt    AttributeType = "int"
	TypeBool   AttributeType = "bool"
)

// Attribute describes one device attribute the driver publishes. The list returned by
// Attributes is the single source of the attribute vocabulary: the devices, the
// documentation (checked by a test) and whoever writes CEL against them use it.
type Attribute struct {
	// Name is the fully qualified name, e.g. rdma.dra.io/link_layer.
	Name resourceapi.QualifiedName
	// Type is the value type.
	Type AttributeType
	// Description says what the value is and when it is omitted.
	Description string
	// Example is a typical value as it appears in CEL, without quotes.
	Example string

	// value extracts the attribute of one device; ok is false when the fact is unknown
	// or does not apply, and the attribute is then omitted rather than zero.
	value func(in attrInput) (v resourceapi.DeviceAttribute, ok bool)
	// format, if set, is the form a string value must have; standard attributes (and
	// ours that are compared with them) are compared across drivers, so a value in
	// another form is omitted.
	format *regexp.Regexp
}

// attrInput is what an attribute value is computed from.
type attrInput struct {
	port  *discovery.Port
	mode  Mode
	netns discovery.NetnsMode
	// rail is the port's rail from the node configuration; nil when it has none.
	rail *int
}

// AttributeDomain qualifies every attribute and capacity of the driver. It stays the
// same when the driver is deployed under another name, so that DeviceClass CEL keeps
// working.
const AttributeDomain = DefaultDriverName

// SharesCapacity is the capacity of a shared device: how many shares of the port are
// left. It is always fully qualified, because the allocator compares names literally.
const SharesCapacity resourceapi.QualifiedName = AttributeDomain + "/shares"

// onWire returns attrs as the driver publishes them. The API puts an attribute name
// without a domain into the domain of the device's driver, and the scheduler and the CEL
// library look names up that way; so when the driver runs under its own name (the domain
// of every attribute), the domain is left off, which makes a node's slices a fifth
// smaller. Under another driver name the names stay fully qualified, so that CEL written
// against rdma.dra.io keeps working. Standard attributes keep their domain.
func onWire(attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, driver string) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	if driver != AttributeDomain {
		return attrs
	}
	out := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(attrs))
	for name, v := range attrs {
		out[resourceapi.QualifiedName(strings.TrimPrefix(string(name), AttributeDomain+"/"))] = v
	}
	return out
}

// LookupAttribute returns the attribute name (fully qualified, as in Attributes) of a
// device that driver published, however the device spells the name: fully qualified or,
// for the driver's own domain, without it. Code that reads published devices uses this
// instead of indexing Attributes, as the scheduler does.
func LookupAttribute(driver string, d *resourceapi.Device, name resourceapi.QualifiedName) (resourceapi.DeviceAttribute, bool) {
	if v, ok := d.Attributes[name]; ok {
		return v, true
	}
	domain, id, ok := strings.Cut(string(name), "/")
	if !ok || domain != driver {
		return resourceapi.DeviceAttribute{}, false
	}
	v, ok := d.Attributes[resourceapi.QualifiedName(id)]
	return v, ok
}

// The driver's own attribute names, fully qualified (the standard ones are
// deviceattribute's); Attributes describes each. Code that reads an attribute uses these.
const (
	AttrIBDev     resourceapi.QualifiedName = AttributeDomain + "/ibdev"
	AttrPort      resourceapi.QualifiedName = AttributeDomain + "/port"
	AttrMode      resourceapi.QualifiedName = AttributeDomain + "/mode"
	AttrLinkLayer resourceapi.QualifiedName = AttributeDomain + "/link_layer"
	AttrPortState resourceapi.QualifiedName = AttributeDomain + "/port_state"
	AttrPhysState resourceapi.QualifiedName = AttributeDomain + "/phys_state"
	AttrSpeedGbps resourceapi.QualifiedName = AttributeDomain + "/speed_gbps"
	AttrNetdev    resourceapi.QualifiedName = AttributeDomain + "/netdev"
	AttrMTU       resourceapi.QualifiedName = AttributeDomain + "/mtu"
	AttrNUMANode  resourceapi.QualifiedName = AttributeDomain + "/numa_node"
	AttrGIDIndex  resourceapi.QualifiedName = AttributeDomain + "/gid_index"
	AttrNodeGUID  resourceapi.QualifiedName = AttributeDomain + "/node_guid"
	AttrFWVer     resourceapi.QualifiedName = AttributeDomain + "/fw_ver"
	AttrBoardID   resourceapi.QualifiedName = AttributeDomain + "/board_id"
	AttrHCAType   resourceapi.QualifiedName = AttributeDomain + "/hca_type"
	AttrModel     resourceapi.QualifiedName = AttributeDomain + "/model"
	AttrVendorID  resourceapi.QualifiedName = AttributeDomain + "/vendor_id"
	AttrDeviceID  resourceapi.QualifiedName = AttributeDomain + "/device_id"
	AttrDriver    resourceapi.QualifiedName = AttributeDomain + "/driver"
	AttrSRIOVVF   resourceapi.QualifiedName = AttributeDomain + "/sriov_vf"
	AttrLAG       resourceapi.QualifiedName = AttributeDomain + "/lag"
	AttrRDMANetns resourceapi.QualifiedName = AttributeDomain + "/rdma_netns"
	AttrRail      resourceapi.QualifiedName = AttributeDomain + "/rail"
	AttrGPUDirect resourceapi.QualifiedName = AttributeDomain + "/gpudirect"
	// AttrDataDirect and AttrNetdevPCIeRoot are published for an adapter with a Data
	// Direct function, whose root complex the standard pcieRoot then names.
	AttrDataDirect     resourceapi.QualifiedName = AttributeDomain + "/data_direct"
	AttrNetdevPCIeRoot resourceapi.QualifiedName = AttributeDomain + "/netdev_pcie_root"
)

// attributes is the table; see Attributes.
var attributes = []Attribute{
	{Name: AttrIBDev, Type: TypeString, Example: "mlx5_0",
		Description: "RDMA device name, as in ibv_devinfo and /sys/class/infiniband",
		value:       stringOf(func(p *discovery.Port) string { return p.IBDev })},
	{Name: AttrPort, Type: TypeInt, Example: "1",
		Description: "port number on the RDMA device, from 1",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return intAttr(in.port.Port), in.port.Port > 0
		}},
	{Name: AttrMode, Type: TypeString, Example: "exclusive",
		Description: "exclusive: the whole port for one claim; shared: a share of the port",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return stringAttr(string(in.mode)), in.mode != ""
		}},
	{Name: AttrRail, Type: TypeInt, Example: "0",
		Description: "rail (the leaf switch the port is cabled to), from the node configuration's rails; omitted when it assigns none",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			if in.rail == nil {
				return resourceapi.DeviceAttribute{}, false
			}
			return intAttr(*in.rail), true
		}},
	{Name: AttrLinkLayer, Type: TypeString, Example: "InfiniBand",
		Description: "InfiniBand or Ethernet (RoCE); omitted when the kernel says Unknown",
		value: stringOf(func(p *discovery.Port) string {
			if p.LinkLayer == discovery.LinkLayerUnknown {
				return ""
			}
			return p.LinkLayer
		})},
	{Name: AttrPortState, Type: TypeString, Example: "ACTIVE",
		Description: "logical port state: DOWN, INIT, ARMED, ACTIVE, ACTIVE_DEFER",
		value:       stringOf(func(p *discovery.Port) string { return p.State })},
	{Name: AttrPhysState, Type: TypeString, Example: "LinkUp",
		Description: "physical port state: Sleep, Polling, Disabled, LinkUp, ...",
		value:       stringOf(func(p *discovery.Port) string { return p.PhysState })},
	{Name: AttrSpeedGbps, Type: TypeInt, Example: "400",
		Description: "port rate in whole Gb/s",
		value:       intOf(func(p *discovery.Port) *int { return p.SpeedGbps })},
	{Name: AttrNetdev, Type: TypeString, Example: "ibp3s0",
		Description: "network interface of the port: IPoIB, the RoCE netdev or its bond; omitted when none",
		value:       stringOf(func(p *discovery.Port) string { return p.Netdev })},
	{Name: AttrMTU, Type: TypeInt, Example: "4096",
		Description: "MTU of the netdev",
		value:       intOf(func(p *discovery.Port) *int { return p.MTU })},
	{Name: AttrNUMANode, Type: TypeInt, Example: "0",
		Description: "NUMA node of the PCI function; omitted when unknown",
		value:       numaNode},
	{Name: AttrGIDIndex, Type: TypeInt, Example: "3",
		Description: "RoCE v2 GID index for NCCL_IB_GID_INDEX; RoCE only, omitted when none",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			if in.port.LinkLayer != discovery.LinkLayerEthernet || in.port.GIDIndex == nil || *in.port.GIDIndex < 0 {
				return resourceapi.DeviceAttribute{}, false
			}
			return intAttr(*in.port.GIDIndex), true
		}},
	{Name: AttrNodeGUID, Type: TypeString, Example: "7c8c:0903:00c3:cfee",
		Description: "node GUID of the RDMA device",
		value:       stringOf(func(p *discovery.Port) string { return p.NodeGUID })},
	{Name: AttrFWVer, Type: TypeString, Example: "28.44.2524",
		Description: "firmware version",
		value:       stringOf(func(p *discovery.Port) string { return p.FWVer })},
	{Name: AttrBoardID, Type: TypeString, Example: "MT_0000000838",
		Description: "board ID (PSID on NVIDIA adapters)",
		value:       stringOf(func(p *discovery.Port) string { return p.BoardID })},
	{Name: AttrHCAType, Type: TypeString, Example: "MT4129",
		Description: "HCA type as the kernel driver reports it",
		value:       stringOf(func(p *discovery.Port) string { return p.HCAType })},
	{Name: AttrModel, Type: TypeString, Example: "ConnectX-7",
		Description: "adapter model derived from the PCI IDs; omitted when unknown",
		value:       stringOf(func(p *discovery.Port) string { return p.Model })},
	{Name: AttrVendorID, Type: TypeString, Example: "15b3",
		Description: "PCI vendor ID, four lower-case hex digits",
		value:       stringOf(func(p *discovery.Port) string { return p.VendorID })},
	{Name: AttrDeviceID, Type: TypeString, Example: "1021",
		Description: "PCI device ID, four lower-case hex digits",
		value:       stringOf(func(p *discovery.Port) string { return p.DeviceID })},
	{Name: AttrDriver, Type: TypeString, Example: "mlx5_core",
		Description: "kernel driver of the PCI function",
		value:       stringOf(func(p *discovery.Port) string { return p.Driver })},
	{Name: AttrSRIOVVF, Type: TypeBool, Example: "false",
		Description: "true for an SR-IOV virtual function",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return boolAttr(in.port.SRIOVVF), true
		}},
	{Name: AttrLAG, Type: TypeBool, Example: "false",
		Description: "true for a hardware LAG device or a port whose netdev is in a bond",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return boolAttr(in.port.LAG), true
		}},
	{Name: AttrRDMANetns, Type: TypeString, Example: "shared",
		Description: "RDMA network namespace mode of the node: shared or exclusive",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return stringAttr(string(in.netns)), in.netns != discovery.NetnsModeUnknown
		}},
	{Name: AttrGPUDirect, Type: TypeString, Example: "dmabuf",
		Description: "how GPU memory can be registered with the port for GPUDirect RDMA: dmabuf (kernel dma-buf) or peermem (nvidia_peermem); omitted when neither",
		value:       stringOf(func(p *discovery.Port) string { return p.GPUDirect })},
	{Name: AttrDataDirect, Type: TypeBool, Example: "true",
		Description: "true when the adapter has a Data Direct function (ConnectX-8 and later): pcieRoot is then its root complex; omitted otherwise",
		value: func(in attrInput) (resourceapi.DeviceAttribute, bool) {
			return boolAttr(true), in.port.DataDirectPCIeRoot != ""
		}},
	{Name: AttrNetdevPCIeRoot, Type: TypeString, Example: "pci0000:00",
		Description: "PCIe root complex of the port's own PCI function, where pcieRoot names the Data Direct one; only with data_direct",
		value: stringOf(func(p *discovery.Port) string {
			if p.DataDirectPCIeRoot == "" {
				return ""
			}
			return p.PCIeRoot
		}),
		format: pcieRootRE},
	{Name: deviceattribute.StandardDeviceAttributePCIeRoot, Type: TypeString, Example: "pci0000:00",
		Description: "standard: PCIe root complex, for matchAttribute with GPUs: that of the Data Direct function with data_direct, else the port's own; omitted for virtual devices",
		value: stringOf(func(p *discovery.Port) string {
			// The adapter's DMA to accelerator memory goes through its Data Direct
			// function, which sits below the accelerator's root complex: that is the
			// root a GPU must share.
			if p.DataDirectPCIeRoot != "" {
				return p.DataDirectPCIeRoot
			}
			return p.PCIeRoot
		}),
		format: pcieRootRE},
	{Name: deviceattribute.StandardDeviceAttributePCIBusID, Type: TypeString, Example: "0000:03:00.0",
		Description: "standard: PCI address of the port's own function (also with data_direct); omitted for virtual devices",
		value:       stringOf(func(p *discovery.Port) string { return p.PCIBusID }),
		format:      pciBusIDRE},
	{Name: deviceattribute.StandardDeviceAttributeNUMANode, Type: TypeInt, Example: "0",
		Description: "standard: NUMA node of the PCI function; omitted when unknown",
		value:       numaNode},
}

// The standard attributes' formats (deviceattribute package): extended BDF and
// pci<domain>:<bus>, lower-case hex.
var (
	pciBusIDRE = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)
	pcieRootRE = regexp.MustCompile(`^pci[0-9a-f]{4}:[0-9a-f]{2}$`)
)

// Attributes returns the attributes the driver may publish, in documentation order.
// A device carries those whose value is known.
func Attributes() []Attribute {
	return append([]Attribute(nil), attributes...)
}

// portAttributes computes the attributes of one device of port p. Strings the API would
// reject (longer than 64 bytes, or not UTF-8, which JSON would silently alter) are
// omitted, not truncated: a truncated identifier could match a CEL selector it should
// not. Every omission is returned as a reason keyed by attribute name.
func portAttributes(in attrInput) (map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, map[resourceapi.QualifiedName]string) {
	attrs := make(map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, len(attributes))
	var omitted map[resourceapi.QualifiedName]string
	for _, a := range attributes {
		v, ok := a.value(in)
		if !ok {
			continue
		}
		if v.StringValue != nil {
			reason := checkString(*v.StringValue)
			if reason == "" && a.format != nil && !a.format.MatchString(*v.StringValue) {
				reason = fmt.Sprintf("value %q does not have the standard form %s", *v.StringValue, a.format)
			}
			if reason != "" {
				if omitted == nil {
					omitted = make(map[resourceapi.QualifiedName]string)
				}
				omitted[a.Name] = reason
				continue
			}
		}
		attrs[a.Name] = v
	}
	return attrs, omitted
}

func checkString(s string) string {
	switch {
	case len(s) > resourceapi.DeviceAttributeMaxValueLength:
		return fmt.Sprintf("value is %d bytes long, the API allows %d", len(s), resourceapi.DeviceAttributeMaxValueLength)
	case !utf8.ValidString(s):
		return "value is not valid UTF-8: " + strconv.Quote(s)
	}
	return ""
}

func numaNode(in attrInput) (resourceapi.DeviceAttribute, bool) {
	// -1 in sysfs means no affinity; discovery turns it into nil, and a negative value
	// must never reach the standard attribute either.
	if in.port.NUMANode == nil || *in.port.NUMANode < 0 {
		return resourceapi.DeviceAttribute{}, false
	}
	return intAttr(*in.port.NUMANode), true
}

func stringOf(get func(*discovery.Port) string) func(attrInput) (resourceapi.DeviceAttribute, bool) {
	return func(in attrInput) (resourceapi.DeviceAttribute, bool) {
		s := get(in.port)
		return stringAttr(s), s != ""
	}
}

func intOf(get func(*discovery.Port) *int) func(attrInput) (resourceapi.DeviceAttribute, bool) {
	return func(in attrInput) (resourceapi.DeviceAttribute, bool) {
		v := get(in.port)
		if v == nil {
			return resourceapi.DeviceAttribute{}, false
		}
		return intAttr(*v), true
	}
}

func stringAttr(s string) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{StringValue: &s}
}

func intAttr(v int) resourceapi.DeviceAttribute {
	i := int64(v)
	return resourceapi.DeviceAttribute{IntValue: &i}
}

func boolAttr(v bool) resourceapi.DeviceAttribute {
	return resourceapi.DeviceAttribute{BoolValue: &v}
}

package mocknode

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// specToInventory maps every JSON key of the node description ("mocknode.Type.key") to
// the keys of the inventory document ("discovery.Type.key") that it decides, through
// ExpectedPorts and the rules of sysfs.md. An empty list says that discovery does not
// report the fact; the comment says why. The description stays a type of its own: it
// describes the hardware (PCI topology, GID and P_Key tables, files discovery never
// reads) in the camelCase of the project's input formats, where the inventory reports
// ports in the snake case of the attribute vocabulary. This table keeps the two from
// drifting apart.
var specToInventory = map[string][]string{
	"mocknode.Node.netnsMode":     {"discovery.Inventory.netns_mode"},
	"mocknode.Node.rdmaDevices":   {"discovery.Inventory.ports"},
	"mocknode.Node.pciFunctions":  {}, // their facts are checked key by key below
	"mocknode.Node.netdevs":       {}, // likewise
	"mocknode.Node.gpus":          {}, // GPUs are no RDMA ports; the code that places GPUs lists them from sysfs itself
	"mocknode.Node.kernelModules": {"discovery.Port.gpudirect"},
	"mocknode.Node.platform":      {}, // the machine around the ports, for the NCCL topology file; no port fact

	"mocknode.PCIFunction.address":         {"discovery.Port.pci_bus_id", "discovery.Port.data_direct_pci_bus_id"},
	"mocknode.PCIFunction.root":            {"discovery.Port.pcie_root", "discovery.Port.data_direct_pcie_root"},
	"mocknode.PCIFunction.bridges":         {}, // the path between root and function; only the root is a placement fact
	"mocknode.PCIFunction.vendor":          {"discovery.Port.vendor_id", "discovery.Port.model"},
	"mocknode.PCIFunction.device":          {"discovery.Port.device_id", "discovery.Port.model"},
	"mocknode.PCIFunction.subsystemVendor": {}, // names no model discovery tells apart
	"mocknode.PCIFunction.subsystemDevice": {},
	"mocknode.PCIFunction.class":           {}, // the link layer comes from the port, not the function class
	"mocknode.PCIFunction.numaNode":        {"discovery.Port.numa_node"},
	"mocknode.PCIFunction.driver":          {"discovery.Port.driver", "discovery.Port.gpudirect"},
	"mocknode.PCIFunction.vpd":             {"discovery.Port.data_direct_pci_bus_id", "discovery.Port.data_direct_pcie_root"},
	"mocknode.PCIFunction.link":            {}, // the NCCL topology file's, read from sysfs at prepare

	"mocknode.VPD.productName":  {}, // the marketing name comes from the PCI IDs
	"mocknode.VPD.partNumber":   {},
	"mocknode.VPD.serialNumber": {}, // a board may carry several adapters under one serial
	"mocknode.VPD.uuid":         {"discovery.Port.data_direct_pci_bus_id", "discovery.Port.data_direct_pcie_root"},
	"mocknode.VPD.functionID":   {}, // the kernel pairs by a VU that only the firmware tells of the NIC

	// A GPU is placed by its own listing (bus/pci/devices, vendor 0x10de), not through a port.
	"mocknode.GPU.address":         {},
	"mocknode.GPU.root":            {},
	"mocknode.GPU.bridges":         {},
	"mocknode.GPU.device":          {},
	"mocknode.GPU.subsystemDevice": {},
	"mocknode.GPU.class":           {},
	"mocknode.GPU.numaNode":        {},
	"mocknode.GPU.driver":          {},
	"mocknode.GPU.link":            {},

	// The platform (platform.go) is read by the NCCL topology file only.
	"mocknode.Platform.cpu":                {},
	"mocknode.Platform.sockets":            {},
	"mocknode.Platform.switch":             {},
	"mocknode.Platform.bridges":            {},
	"mocknode.CPU.modalias":                {},
	"mocknode.CPU.cores":                   {},
	"mocknode.CPU.threads":                 {},
	"mocknode.CPU.rootPort":                {},
	"mocknode.BridgeModel.vendor":          {},
	"mocknode.BridgeModel.device":          {},
	"mocknode.BridgeModel.subsystemVendor": {},
	"mocknode.BridgeModel.subsystemDevice": {},
	"mocknode.BridgeModel.link":            {},
	"mocknode.Bridge.address":              {},
	"mocknode.Bridge.vendor":               {},
	"mocknode.Bridge.device":               {},
	"mocknode.Bridge.subsystemVendor":      {},
	"mocknode.Bridge.subsystemDevice":      {},
	"mocknode.Bridge.link":                 {},
	"mocknode.Link.gen":                    {},
	"mocknode.Link.width":                  {},

	"mocknode.KernelModule.name":    {"discovery.Port.gpudirect"},
	"mocknode.KernelModule.taint":   {"discovery.Port.gpudirect"},
	"mocknode.KernelModule.version": {},
	"mocknode.PCIFunction.physFn":   {"discovery.Port.physfn", "discovery.Port.sriov_vf"},

	"mocknode.RDMADevice.name":         {"discovery.Port.ibdev", "discovery.Port.lag"}, // mlx5_bond_N is a hardware LAG
	"mocknode.RDMADevice.pci":          {"discovery.Port.virtual"},
	"mocknode.RDMADevice.parent":       {"discovery.Port.netdev"},
	"mocknode.RDMADevice.nodeGUID":     {"discovery.Port.node_guid"},
	"mocknode.RDMADevice.sysImageGUID": {}, // the same for every port of an adapter; no placement use
	"mocknode.RDMADevice.fwVer":        {"discovery.Port.fw_ver"},
	"mocknode.RDMADevice.boardID":      {"discovery.Port.board_id"},
	"mocknode.RDMADevice.hcaType":      {"discovery.Port.hca_type"},
	"mocknode.RDMADevice.nodeType":     {"discovery.Port.model"}, // of virtual devices
	"mocknode.RDMADevice.noMAD":        {"discovery.Port.umad", "discovery.Port.issm"},
	"mocknode.RDMADevice.ports":        {"discovery.Inventory.ports"},

	"mocknode.Port.number":       {"discovery.Port.port"},
	"mocknode.Port.state":        {"discovery.Port.port_state"},
	"mocknode.Port.physState":    {"discovery.Port.phys_state"},
	"mocknode.Port.rate":         {"discovery.Port.rate", "discovery.Port.speed_gbps"},
	"mocknode.Port.linkLayer":    {"discovery.Port.link_layer"},
	"mocknode.Port.lid":          {"discovery.Port.lid"},
	"mocknode.Port.smLID":        {"discovery.Port.sm_lid"},
	"mocknode.Port.gidTableSize": {}, // discovery must not care about the table's length
	"mocknode.Port.gids":         {"discovery.Port.gid_index", "discovery.Port.port_guid", "discovery.Port.netdev"},
	"mocknode.Port.pkeys":        {}, // partitions are not published
	"mocknode.Port.counters":     {}, // traffic counters are metrics, never inventory

	// The GID table itself is not in the inventory (discover --gids reads it apart); what
	// it decides is Port.gids's.
	"mocknode.GID.index": {"discovery.Port.gid_index"},
	"mocknode.GID.gid":   {"discovery.Port.gid_index", "discovery.Port.port_guid"},
	"mocknode.GID.type":  {"discovery.Port.gid_index"},
	"mocknode.GID.ndev":  {"discovery.Port.netdev"},

	"mocknode.Netdev.name":      {"discovery.Port.netdev"},
	"mocknode.Netdev.pci":       {}, // which function the interface belongs to: decides Port.netdev with devPort
	"mocknode.Netdev.subDir":    {},
	"mocknode.Netdev.address":   {}, // the pod gets addresses of its own; the host's MAC is no placement fact
	"mocknode.Netdev.mtu":       {"discovery.Port.mtu"},
	"mocknode.Netdev.operState": {"discovery.Port.netdev_operstate"},
	"mocknode.Netdev.carrier":   {}, // operstate says it
	"mocknode.Netdev.type":      {}, // the port's link layer says it
	"mocknode.Netdev.devPort":   {"discovery.Port.netdev"},
	"mocknode.Netdev.master":    {"discovery.Port.netdev", "discovery.Port.lag"},
	"mocknode.Netdev.bond":      {"discovery.Port.lag"},

	"mocknode.CharDev.name":  {"discovery.CharDev.name"},
	"mocknode.CharDev.kind":  {"discovery.Port.uverbs", "discovery.Port.umad", "discovery.Port.issm"},
	"mocknode.CharDev.major": {"discovery.CharDev.major"},
	"mocknode.CharDev.minor": {"discovery.CharDev.minor"},
	"mocknode.CharDev.ibdev": {}, // the port it is listed under says it
	"mocknode.CharDev.port":  {},
	"mocknode.CharDev.mode":  {}, // rdma-core's udev rules set it, not the driver
}

// jsonKeys lists the JSON keys of struct types as "package.Type.key", following embedded
// structs as encoding/json does.
func jsonKeys(types ...reflect.Type) []string {
	var out []string
	var walk func(name string, t reflect.Type)
	walk = func(name string, t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			switch {
			case key == "-" || !f.IsExported():
			case f.Anonymous && key == "" && f.Type.Kind() == reflect.Struct:
				walk(name, f.Type)
			case key == "":
				out = append(out, name+"."+f.Name)
			default:
				out = append(out, name+"."+key)
			}
		}
	}
	for _, t := range types {
		walk(t.String(), t)
	}
	return out
}

// drift lists what keeps table from being a complete map of the spec's keys onto the
// inventory's: spec keys it misses, entries for keys that do not exist, and inventory
// keys no spec key decides.
func drift(table map[string][]string, spec, inventory []string) []string {
	var out []string
	for _, k := range spec {
		if _, ok := table[k]; !ok {
			out = append(out, "description key "+k+" has no entry")
		}
	}
	decided := map[string]bool{}
	for k, targets := range table {
		if !slices.Contains(spec, k) {
			out = append(out, "entry "+k+" is no key of the description")
		}
		for _, t := range targets {
			if !slices.Contains(inventory, t) {
				out = append(out, "entry "+k+" names "+t+", no key of the inventory")
			}
			decided[t] = true
		}
	}
	for _, k := range inventory {
		if !decided[k] {
			out = append(out, "inventory key "+k+" is decided by no key of the description")
		}
	}
	slices.Sort(out)
	return out
}

// TestDescriptionCoversInventory checks, over the JSON keys of both, that every fact of a
// mock node's description is either reported in the inventory or said not to be, and
// that every fact of the inventory comes from the description.
func TestDescriptionCoversInventory(t *testing.T) {
	spec := jsonKeys(reflect.TypeFor[Node](), reflect.TypeFor[PCIFunction](), reflect.TypeFor[RDMADevice](),
		reflect.TypeFor[Port](), reflect.TypeFor[GID](), reflect.TypeFor[Netdev](), reflect.TypeFor[CharDev](),
		reflect.TypeFor[VPD](), reflect.TypeFor[GPU](), reflect.TypeFor[KernelModule](), reflect.TypeFor[Platform](),
		reflect.TypeFor[CPU](), reflect.TypeFor[BridgeModel](), reflect.TypeFor[Bridge](), reflect.TypeFor[Link]())
	inventory := jsonKeys(reflect.TypeFor[discovery.Inventory](), reflect.TypeFor[discovery.Port](), reflect.TypeFor[discovery.CharDev]())

	withoutRate := map[string][]string{}
	for k, v := range specToInventory {
		if k != "mocknode.Port.rate" {
			withoutRate[k] = v
		}
	}
	// The inventory document's keys include those of the embedded Inventory.
	if doc := jsonKeys(reflect.TypeFor[discovery.Document]()); !slices.Equal(doc, []string{"discovery.Document.version", "discovery.Document.netns_mode", "discovery.Document.ports"}) {
		t.Errorf("jsonKeys(Document) = %v", doc)
	}
	tests := []struct {
		name      string
		table     map[string][]string
		spec, inv []string
		want      []string
	}{
		{name: "description and inventory", table: specToInventory, spec: spec, inv: inventory},
		{name: "a description key without entry", table: withoutRate, spec: spec, inv: inventory,
			want: []string{"description key mocknode.Port.rate has no entry", "inventory key discovery.Port.rate is decided by no key of the description",
				"inventory key discovery.Port.speed_gbps is decided by no key of the description"}},
		{name: "an inventory key nothing decides", table: specToInventory, spec: spec, inv: append(slices.Clone(inventory), "discovery.Port.speed"),
			want: []string{"inventory key discovery.Port.speed is decided by no key of the description"}},
		{name: "an entry for a key that is gone", table: specToInventory, spec: slices.DeleteFunc(slices.Clone(spec), func(k string) bool { return k == "mocknode.Port.pkeys" }), inv: inventory,
			want: []string{"entry mocknode.Port.pkeys is no key of the description"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := drift(tt.table, tt.spec, tt.inv); !slices.Equal(got, tt.want) {
				t.Errorf("drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

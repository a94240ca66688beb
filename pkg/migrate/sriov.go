package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// SRIOVDevicePluginPrefix is the resource prefix sriov-network-device-plugin uses when
// neither the entry nor its --resource-prefix flag says otherwise. It is also the prefix
// of a NicClusterPolicy's resources without resourcePrefix: the NVIDIA Network Operator
// runs the plugin without --resource-prefix (its DaemonSet passes only the log flags and
// --use-cdi), so the nvidia.com of its examples comes from each entry's resourcePrefix.
const SRIOVDevicePluginPrefix = "intel.com"

// The fields of sriov-network-device-plugin's config.json, per level.
var (
	sriovTopFields   = []string{"resourceList"}
	sriovEntryFields = []string{"resourceName", "resourcePrefix", "deviceType", "isRdma", "excludeTopology", "selectors", "additionalInfo"}
	// sriovSelectorFields are the selectors of the netDevice type and the generic ones.
	sriovSelectorFields = []string{"vendors", "devices", "drivers", "pciAddresses", "pfNames", "rootDevices", "linkTypes", "isRdma",
		"acpiIndexes", "ddpProfiles", "needVhostNet", "vdpaType", "pKeys", "auxTypes"}
)

// sriovConfig is the sriov-network-device-plugin's config.json.
type sriovConfig struct {
	ResourceList []json.RawMessage `json:"resourceList"`
}

type sriovEntry struct {
	ResourceName   string `json:"resourceName"`
	ResourcePrefix string `json:"resourcePrefix"`
	DeviceType     string `json:"deviceType"`
	// IsRdma at the top of an entry is the older place; newer versions read it from
	// the selectors.
	IsRdma          bool            `json:"isRdma"`
	ExcludeTopology bool            `json:"excludeTopology"`
	Selectors       json.RawMessage `json:"selectors"`
	AdditionalInfo  json.RawMessage `json:"additionalInfo"`
}

type sriovSelectors struct {
	Vendors      []string `json:"vendors"`
	Devices      []string `json:"devices"`
	Drivers      []string `json:"drivers"`
	PCIAddresses []string `json:"pciAddresses"`
	PFNames      []string `json:"pfNames"`
	RootDevices  []string `json:"rootDevices"`
	LinkTypes    []string `json:"linkTypes"`
	IsRdma       bool     `json:"isRdma"`
	AcpiIndexes  []string `json:"acpiIndexes"`
	DDPProfiles  []string `json:"ddpProfiles"`
	NeedVhostNet bool     `json:"needVhostNet"`
	VdpaType     string   `json:"vdpaType"`
	PKeys        []string `json:"pKeys"`
	AuxTypes     []string `json:"auxTypes"`

	raw json.RawMessage
}

// FromSRIOVDevicePlugin converts the RDMA resources (isRdma) of a
// sriov-network-device-plugin configuration (config.json, a ConfigMap or a
// NicClusterPolicy) into exclusive pools: a unit of such a resource was one whole
// device, a VF or a PF, as is one allocation from an exclusive pool.
// opts.ResourcePrefix is the plugin's -resource-prefix.
func FromSRIOVDevicePlugin(data []byte, opts Options) (*Result, error) {
	in, err := configJSON(data, opts.InputName, "sriovDevicePlugin", "rdmaSharedDevicePlugin", FlagShared)
	if err != nil {
		return nil, err
	}
	raw, where := in.raw, in.where
	keys, ok := objectKeys(raw)
	if !ok {
		return nil, fmt.Errorf("decode %s: want an object with resourceList, got %s", where, jsonKind(raw))
	}
	if slices.Contains(keys, "configList") && !slices.Contains(keys, "resourceList") {
		return nil, fmt.Errorf("%s has configList, not resourceList: this looks like a k8s-rdma-shared-dev-plugin config; use %s", where, FlagShared)
	}
	defaultPrefix := opts.ResourcePrefix
	if defaultPrefix == "" {
		defaultPrefix = SRIOVDevicePluginPrefix
	}
	res := &Result{}
	var cfg sriovConfig
	if err := decode(raw, &cfg, where); err != nil {
		return nil, err
	}
	for _, k := range unknownKeys(raw, sriovTopFields...) {
		res.note("%s: unknown field %q; the plugin ignores it, nothing carried over", where, k)
	}
	if len(cfg.ResourceList) == 0 {
		return nil, fmt.Errorf("%s has no resourceList entries", where)
	}
	taken := map[string]bool{}
	seen := map[string]string{} // prefix/resourceName -> the entry that has it
	for i, rawEntry := range cfg.ResourceList {
		var e sriovEntry
		if err := decode(rawEntry, &e, fmt.Sprintf("%s resourceList[%d]", where, i)); err != nil {
			return nil, err
		}
		where := fmt.Sprintf("resourceList[%d] (%s)", i, e.ResourceName)
		sets, err := selectorSets(e.Selectors)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		rdma := e.IsRdma
		for _, s := range sets {
			rdma = rdma || s.IsRdma
		}
		if !rdma {
			res.note("%s: not an RDMA resource (no isRdma); skipped, it stays with the SR-IOV device plugin", where)
			continue
		}
		for _, k := range unknownKeys(rawEntry, sriovEntryFields...) {
			res.note("%s: unknown field %q; the plugin ignores it, nothing carried over", where, k)
		}
		if e.ResourceName == "" {
			res.problem(where, "resourceName", "", "missing; the plugin refuses such an entry: give it a resourceName or remove it")
			continue
		}
		if e.DeviceType != "" && e.DeviceType != "netDevice" {
			res.note("%s: deviceType %s; the driver publishes every RDMA device with its ports, whatever its PCI function type, so the pool selects by the selectors below", where, e.DeviceType)
		}
		prefix := e.ResourcePrefix
		if prefix == "" {
			prefix = defaultPrefix
			if in.source == SourceNicClusterPolicy && opts.ResourcePrefix == "" {
				res.note("%s: no resourcePrefix, and the Network Operator runs the plugin without --resource-prefix: pods asked for %s/%s, which the pool serves",
					where, prefix, e.ResourceName)
			}
		}
		// The plugin compares names with their prefix.
		if other, dup := seen[prefix+"/"+e.ResourceName]; dup {
			res.problem(where, "resourceName", "", "%s/%s is also the resource of %s: the plugin refuses a configuration with two resources of one name "+
				"(\"resource name already exists\"), and of two pools with one extendedResourceName only the older would serve it; remove or rename one entry",
				prefix, e.ResourceName, other)
			continue
		}
		seen[prefix+"/"+e.ResourceName] = where
		p := newPool(poolName(e.ResourceName, taken), v1alpha1.PoolModeExclusive, prefix+"/"+e.ResourceName)
		c := &entryConverter{res: res, opts: opts, entry: where, resourceName: e.ResourceName}
		if len(sets) > 1 {
			// The sets are alternatives (OR): converting the first only narrows.
			res.note("pool %s: %d selector sets; an RdmaPool has one, so only the first is converted and the pool selects fewer devices. Write a pool per further set "+
				"(only one of them may carry the extended resource name) or express them in spec.cel", p.Name, len(sets))
		}
		entry := Entry{Plugin: PluginSRIOV, Resource: prefix + "/" + e.ResourceName, Pool: p.Name}
		for j, s := range sets {
			field := "selectors"
			if len(sets) > 1 || strings.HasPrefix(strings.TrimSpace(string(e.Selectors)), "[") {
				field = fmt.Sprintf("selectors[%d]", j)
			}
			if j == 0 {
				convertSRIOVSelectors(&p, s, c, field)
			}
			entry.Sets = append(entry.Sets, s.pluginSelector())
		}
		if len(sets) == 0 {
			res.note("pool %s: no selectors, as in the entry: it selects every RDMA port of every node", p.Name)
		}
		if e.ExcludeTopology || len(e.AdditionalInfo) > 0 {
			res.note("%s: excludeTopology and additionalInfo have no equivalent: the DeviceClass has no topology hints or extra environment; "+
				"align with GPUs through matchAttribute resource.kubernetes.io/pcieRoot in the claim", where)
		}
		res.Pools = append(res.Pools, p)
		res.Entries = append(res.Entries, entry)
	}
	if len(res.Pools) > 0 {
		res.note("unit kept: one unit of an SR-IOV RDMA resource was one whole device (a VF or a PF) and stays one: an exclusive pool hands out a port " +
			"and keeps the other ports of its RDMA device from anyone else. The kubelet plugin must publish the VFs: " +
			"they are RDMA devices of their own (rdma.dra.io/sriov_vf is true)")
	}
	res.check()
	return res, nil
}

// selectorSets reads selectors as one object or, in newer versions, a list of objects
// of which a device must match one.
func selectorSets(raw json.RawMessage) ([]sriovSelectors, error) {
	trimmed := strings.TrimSpace(string(raw))
	var items []json.RawMessage
	switch {
	case trimmed == "" || trimmed == "null":
		return nil, nil
	case strings.HasPrefix(trimmed, "["):
		if err := json.Unmarshal(raw, &items); err != nil {
			return nil, fmt.Errorf("decode selectors: want a list of objects")
		}
	default:
		items = []json.RawMessage{raw}
	}
	var sets []sriovSelectors
	for i, it := range items {
		var s sriovSelectors
		if err := decode(it, &s, fmt.Sprintf("selectors (set %d)", i)); err != nil {
			return nil, fmt.Errorf("decode selectors: %w", err)
		}
		if _, ok := objectKeys(it); !ok {
			return nil, fmt.Errorf("decode selectors: want an object, got %s", jsonKind(it))
		}
		s.raw = it
		sets = append(sets, s)
	}
	return sets, nil
}

// pluginSelector is the set as Preview evaluates the plugin's selection.
func (in sriovSelectors) pluginSelector() PluginSelector {
	ps := PluginSelector{Vendors: in.Vendors, DeviceIDs: in.Devices, Drivers: in.Drivers, PCIAddresses: in.PCIAddresses,
		PFNames: in.PFNames, RootDevices: in.RootDevices, LinkTypes: in.LinkTypes}
	ps.Unsupported = append(ps.Unsupported, in.unsupported()...)
	return ps
}

// unsupported names the set fields without equivalent in the driver's attributes.
func (in sriovSelectors) unsupported() []string {
	var out []string
	for _, u := range []struct {
		name string
		set  bool
	}{
		{"acpiIndexes", len(in.AcpiIndexes) > 0}, {"ddpProfiles", len(in.DDPProfiles) > 0}, {"needVhostNet", in.NeedVhostNet},
		{"vdpaType", in.VdpaType != ""}, {"pKeys", len(in.PKeys) > 0}, {"auxTypes", len(in.AuxTypes) > 0},
	} {
		if u.set {
			out = append(out, u.name)
		}
	}
	return out
}

func convertSRIOVSelectors(p *v1alpha1.RdmaPool, in sriovSelectors, c *entryConverter, field string) {
	s := &p.Spec.Selectors
	for _, k := range unknownKeys(in.raw, sriovSelectorFields...) {
		c.dropped(field+"."+k, fmt.Sprintf("unknown selector field %q: if a plugin version knows it, it narrowed the selection", k))
	}
	s.Vendors = c.values(in.Vendors, field+".vendors", "a PCI vendor ID of four hex digits", validHexID)
	s.DeviceIDs = c.values(in.Devices, field+".devices", "a PCI device ID of four hex digits", validHexID)
	s.Drivers = c.values(in.Drivers, field+".drivers", "a driver name", nonEmpty)
	s.PCIAddresses = c.values(in.PCIAddresses, field+".pciAddresses", literalWant, literal)
	s.LinkTypes = toLinkTypes(c.values(in.LinkTypes, field+".linkTypes", "a link type (infiniband, ether, IB, ETH)", validLinkType))
	if len(in.PFNames) > 0 {
		c.dropped(field+".pfNames", fmt.Sprintf("pfNames %v has no equivalent: the driver publishes each RDMA device with its own netdev and PCI address, not its PF's name; "+
			"select the VFs by pciAddresses (a pattern such as 0000:3b:0*) instead", in.PFNames))
	}
	if len(in.RootDevices) > 0 {
		c.dropped(field+".rootDevices", fmt.Sprintf("rootDevices %v has no equivalent: they are PF addresses and the VFs have others; without it the pool selects the PFs and the VFs of every PF; "+
			"list the VFs' addresses in pciAddresses instead (rdma-dra discover shows them)", in.RootDevices))
	}
	for _, u := range in.unsupported() {
		c.dropped(field+"."+u, fmt.Sprintf("selector %s has no equivalent; refine with spec.cel if an attribute tells the devices apart", u))
	}
	if len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.PCIAddresses)+len(s.LinkTypes) == 0 {
		c.res.note("pool %s: no selector carried over, so it selects every RDMA port of every node", p.Name)
	}
}

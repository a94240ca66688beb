package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// SRIOVDevicePluginPrefix is the resource prefix sriov-network-device-plugin uses when
// neither the entry nor its -resource-prefix flag says otherwise.
const SRIOVDevicePluginPrefix = "intel.com"

// sriovConfig is the sriov-network-device-plugin's config.json.
type sriovConfig struct {
	ResourceList []sriovEntry `json:"resourceList"`
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
}

// FromSRIOVDevicePlugin converts the RDMA resources (isRdma) of a
// sriov-network-device-plugin configuration (config.json, a ConfigMap or a
// NicClusterPolicy) into exclusive pools: a unit of such a resource was one whole
// device, a VF or a PF, as is one allocation from an exclusive pool. defaultPrefix is the
// plugin's -resource-prefix; empty means SRIOVDevicePluginPrefix.
func FromSRIOVDevicePlugin(data []byte, defaultPrefix string) (*Result, error) {
	raw, where, err := configJSON(data, "sriovDevicePlugin")
	if err != nil {
		return nil, err
	}
	if defaultPrefix == "" {
		defaultPrefix = SRIOVDevicePluginPrefix
	}
	res := &Result{}
	var cfg sriovConfig
	if err := decodeStrict(raw, &cfg, res, where); err != nil {
		return nil, err
	}
	if len(cfg.ResourceList) == 0 {
		return nil, fmt.Errorf("%s has no resourceList entries", where)
	}
	taken := map[string]bool{}
	for i, e := range cfg.ResourceList {
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
		if e.DeviceType != "" && e.DeviceType != "netDevice" {
			res.note("%s: deviceType %s; the driver publishes every RDMA device with its ports, whatever its PCI function type, so the pool selects by the selectors below", where, e.DeviceType)
		}
		prefix := e.ResourcePrefix
		if prefix == "" {
			prefix = defaultPrefix
		}
		p := newPool(poolName(e.ResourceName, taken), v1alpha1.PoolModeExclusive, prefix+"/"+e.ResourceName)
		if len(sets) > 1 {
			res.note("pool %s: %d selector sets; an RdmaPool has one, so only the first is converted. Write a pool per further set "+
				"(only one of them may carry the extended resource name) or express them in spec.cel", p.Name, len(sets))
		}
		if len(sets) > 0 {
			convertSRIOVSelectors(&p, sets[0], res, where)
		} else {
			res.note("pool %s: no selectors, so it selects every RDMA port of every node", p.Name)
		}
		if e.ExcludeTopology || len(e.AdditionalInfo) > 0 {
			res.note("%s: excludeTopology and additionalInfo have no equivalent: the DeviceClass has no topology hints or extra environment; "+
				"align with GPUs through matchAttribute resource.kubernetes.io/pcieRoot in the claim", where)
		}
		res.Pools = append(res.Pools, p)
	}
	if len(res.Pools) > 0 {
		res.note("unit semantics: a unit of an SR-IOV RDMA resource was one whole device (a VF or a PF); a unit served by an exclusive " +
			"RdmaPool is one whole port of an RDMA device, the same for single-port VFs. The kubelet plugin must publish the VFs: " +
			"they are RDMA devices of their own (rdma.dra.io/sriov_vf is true)")
	}
	res.check()
	return res, nil
}

// selectorSets reads selectors as one object or, in newer versions, a list of objects
// of which a device must match one.
func selectorSets(raw json.RawMessage) ([]sriovSelectors, error) {
	trimmed := strings.TrimSpace(string(raw))
	switch {
	case trimmed == "" || trimmed == "null":
		return nil, nil
	case strings.HasPrefix(trimmed, "["):
		var sets []sriovSelectors
		if err := json.Unmarshal(raw, &sets); err != nil {
			return nil, fmt.Errorf("decode selectors: %w", err)
		}
		return sets, nil
	}
	var s sriovSelectors
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("decode selectors: %w", err)
	}
	return []sriovSelectors{s}, nil
}

func convertSRIOVSelectors(p *v1alpha1.RdmaPool, in sriovSelectors, res *Result, where string) {
	s := &p.Spec.Selectors
	s.Vendors = hexIDs(in.Vendors, res, where, "vendors")
	s.DeviceIDs = hexIDs(in.Devices, res, where, "devices")
	s.Drivers = slices.Clone(in.Drivers)
	s.PCIAddresses = slices.Clone(in.PCIAddresses)
	s.LinkTypes = linkTypes(in.LinkTypes, res, where)
	if len(in.PFNames) > 0 {
		var ranges []string
		for _, n := range in.PFNames {
			if strings.Contains(n, "#") {
				ranges = append(ranges, n)
			}
		}
		msg := fmt.Sprintf("pool %s: pfNames %v dropped: the driver publishes each RDMA device with its own netdev and PCI address, not its PF's name; "+
			"select the VFs by spec.selectors.pciAddresses (a pattern such as 0000:3b:0*) or ifNames of the VFs' netdevs", p.Name, in.PFNames)
		if len(ranges) > 0 {
			msg += fmt.Sprintf("; the VF ranges %v have no equivalent, list those VFs' PCI addresses instead", ranges)
		}
		res.note("%s", msg)
	}
	if len(in.RootDevices) > 0 {
		res.note("pool %s: rootDevices %v dropped: they are the PFs' PCI addresses and VFs have others; list the VFs' addresses "+
			"in spec.selectors.pciAddresses, or the PFs' own addresses if the pool is for PFs", p.Name, in.RootDevices)
	}
	for _, u := range []struct {
		name string
		set  bool
	}{
		{"acpiIndexes", len(in.AcpiIndexes) > 0}, {"ddpProfiles", len(in.DDPProfiles) > 0}, {"needVhostNet", in.NeedVhostNet},
		{"vdpaType", in.VdpaType != ""}, {"pKeys", len(in.PKeys) > 0}, {"auxTypes", len(in.AuxTypes) > 0},
	} {
		if u.set {
			res.note("pool %s: selector %s has no equivalent and was dropped; refine with spec.cel if an attribute tells the devices apart", p.Name, u.name)
		}
	}
	if len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.PCIAddresses)+len(s.LinkTypes) == 0 {
		res.note("pool %s: no selector carried over, so it selects every RDMA port of every node; narrow it before applying", p.Name)
	}
}

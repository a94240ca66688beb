package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// SharedDevicePluginPrefix is the resource prefix k8s-rdma-shared-dev-plugin uses when
// an entry has no resourcePrefix. It has no flag to change it, and the Network Operator
// runs it without one.
const SharedDevicePluginPrefix = "rdma"

// The CLI flags that choose the input kind, named in hints for the wrong one.
const (
	FlagShared = "--from-shared-dev-plugin"
	FlagSRIOV  = "--from-sriov-device-plugin"
)

// The flags that write the node side of legacy pools, named in the problem of a
// conversion that has legacy pools but writes neither.
const (
	FlagValuesOut     = "--values-out"
	FlagNodeConfigOut = "--node-config-out"
)

// The fields of k8s-rdma-shared-dev-plugin's config.json, per level.
var (
	sharedTopFields      = []string{"periodicUpdateInterval", "kubeletRootDir", "configList"}
	sharedEntryFields    = []string{"resourceName", "resourcePrefix", "rdmaHcaMax", "devices", "selectors"}
	sharedSelectorFields = []string{"vendors", "deviceIDs", "drivers", "ifNames", "linkTypes"}
)

// sharedConfig is the k8s-rdma-shared-dev-plugin's config.json.
type sharedConfig struct {
	PeriodicUpdateInterval *int              `json:"periodicUpdateInterval"`
	KubeletRootDir         string            `json:"kubeletRootDir"`
	ConfigList             []json.RawMessage `json:"configList"`
}

type sharedEntry struct {
	ResourceName   string          `json:"resourceName"`
	ResourcePrefix string          `json:"resourcePrefix"`
	RdmaHcaMax     *int            `json:"rdmaHcaMax"`
	Devices        []string        `json:"devices"`
	Selectors      json.RawMessage `json:"selectors"`
}

type sharedSelectors struct {
	Vendors   []string `json:"vendors"`
	DeviceIDs []string `json:"deviceIDs"`
	Drivers   []string `json:"drivers"`
	IfNames   []string `json:"ifNames"`
	LinkTypes []string `json:"linkTypes"`
}

func (s *sharedSelectors) empty() bool {
	return len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.IfNames)+len(s.LinkTypes) == 0
}

// FromSharedDevicePlugin converts a k8s-rdma-shared-dev-plugin configuration (config.json,
// a ConfigMap or a NicClusterPolicy) into legacy pools, one per configList entry, each
// serving the entry's extended resource name, and the node configuration's
// legacyResources entries that give the pools their ports: one unit of the resource
// stays every port the entry selects on the node, held by up to rdmaHcaMax pods.
func FromSharedDevicePlugin(data []byte, opts Options) (*Result, error) {
	in, err := configJSON(data, opts.InputName, "rdmaSharedDevicePlugin", "sriovDevicePlugin", FlagSRIOV)
	if err != nil {
		return nil, err
	}
	raw, where := in.raw, in.where
	keys, ok := objectKeys(raw)
	if !ok {
		return nil, fmt.Errorf("decode %s: want an object with configList, got %s", where, jsonKind(raw))
	}
	if slices.Contains(keys, "resourceList") && !slices.Contains(keys, "configList") {
		return nil, fmt.Errorf("%s has resourceList, not configList: this looks like an sriov-network-device-plugin config; use %s", where, FlagSRIOV)
	}
	res := &Result{}
	var cfg sharedConfig
	if err := decode(raw, &cfg, where); err != nil {
		return nil, err
	}
	for _, k := range unknownKeys(raw, sharedTopFields...) {
		res.note("%s: unknown field %q; the plugin ignores it, nothing carried over", where, k)
	}
	if len(cfg.ConfigList) == 0 {
		return nil, fmt.Errorf("%s has no configList entries", where)
	}
	if cfg.PeriodicUpdateInterval != nil || cfg.KubeletRootDir != "" {
		res.note("periodicUpdateInterval and kubeletRootDir have no equivalent: the kubelet plugin rescans ports on its own (--rescan-interval) and takes the kubelet's directory from the chart (kubeletDir)")
	}
	defaultPrefix := opts.ResourcePrefix
	if defaultPrefix == "" {
		defaultPrefix = SharedDevicePluginPrefix
	}
	taken := map[string]bool{}
	seen := map[string]string{} // resourceName -> the entry that has it
	for i, rawEntry := range cfg.ConfigList {
		var e sharedEntry
		if err := decode(rawEntry, &e, fmt.Sprintf("%s configList[%d]", where, i)); err != nil {
			return nil, err
		}
		where := fmt.Sprintf("configList[%d] (%s)", i, e.ResourceName)
		for _, k := range unknownKeys(rawEntry, sharedEntryFields...) {
			res.note("%s: unknown field %q; the plugin ignores it, nothing carried over", where, k)
		}
		if e.ResourceName == "" {
			res.problem(where, "resourceName", "", "missing; the plugin refuses such an entry: give it a resourceName or remove it")
			continue
		}
		// The plugin compares names without their prefix.
		if other, dup := seen[e.ResourceName]; dup {
			res.problem(where, "resourceName", "", "%s is also the resourceName of %s: the plugin refuses a configuration with two resources of one name "+
				"(\"resource name already exists\"), and of two pools with one extendedResourceName only the older would serve it; remove or rename one entry", e.ResourceName, other)
			continue
		}
		seen[e.ResourceName] = where
		var sel sharedSelectors
		if len(e.Selectors) > 0 && string(e.Selectors) != "null" {
			if err := decode(e.Selectors, &sel, where+" selectors"); err != nil {
				return nil, err
			}
		}
		switch {
		case sel.empty() && len(e.Devices) == 0:
			res.problem(where, "selectors", "", "neither selectors nor devices: the plugin refuses such an entry, so it never served this resource; give it selectors or remove it")
			continue
		case !sel.empty() && len(e.Devices) > 0:
			res.problem(where, "devices", "", "both selectors and devices: the plugin refuses such an entry, so it never served this resource; move devices into selectors.ifNames")
			continue
		}
		maxPods, ok := rdmaHcaMax(res, where, e.RdmaHcaMax)
		if !ok {
			continue
		}
		c := &entryConverter{res: res, opts: opts, entry: where, resourceName: e.ResourceName}
		for _, k := range unknownKeys(e.Selectors, sharedSelectorFields...) {
			c.dropped("selectors."+k, fmt.Sprintf("unknown selector field %q: if a plugin version knows it, it narrowed the selection", k))
		}
		prefix := e.ResourcePrefix
		if prefix == "" {
			prefix = defaultPrefix
		}
		p := newPool(poolName(e.ResourceName, taken), v1alpha1.PoolModeLegacy, prefix+"/"+e.ResourceName)
		lr := nodeconfig.LegacyResource{Name: p.Name, MaxPods: maxPods}
		s := &lr.Selectors
		s.Vendors = c.values(sel.Vendors, "selectors.vendors", "a PCI vendor ID of four hex digits", validHexID)
		s.DeviceIDs = c.values(sel.DeviceIDs, "selectors.deviceIDs", "a PCI device ID of four hex digits", validHexID)
		s.Drivers = c.values(sel.Drivers, "selectors.drivers", "a driver name", nonEmpty)
		s.IfNames = c.values(sel.IfNames, "selectors.ifNames", literalWant, literal)
		// The plugin reads devices as ifNames when there are no selectors.
		s.IfNames = append(s.IfNames, c.values(e.Devices, "devices", literalWant, literal)...)
		for _, t := range toLinkTypes(c.values(sel.LinkTypes, "selectors.linkTypes", "a link type (infiniband, ether, IB, ETH)", validLinkType)) {
			s.LinkTypes = append(s.LinkTypes, string(t))
		}
		if len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers) == 0 {
			// The plugin lists PCI network functions only; a port without a PCI
			// address (soft-RoCE) matches no pattern, so this keeps it out.
			s.PCIAddresses = []string{"*"}
		}
		if len(e.Devices) > 0 {
			res.note("%s: devices %v became the legacy resource's ifNames, which the plugin treats the same", where, e.Devices)
		}
		if len(s.IfNames) > 0 {
			res.note("pool %s: ifNames match each port's netdev as discovery reports it: the bond for a bonded or LAG port, where the plugin matched the PCI function's own interface; check with --dry-run-against-node", p.Name)
		}
		res.Pools = append(res.Pools, p)
		res.LegacyResources = append(res.LegacyResources, lr)
		res.Entries = append(res.Entries, Entry{Plugin: PluginShared, Resource: prefix + "/" + e.ResourceName, Pool: p.Name, MaxPods: maxPods,
			Sets: []PluginSelector{{Vendors: sel.Vendors, DeviceIDs: sel.DeviceIDs, Drivers: sel.Drivers,
				IfNames: append(slices.Clone(sel.IfNames), e.Devices...), LinkTypes: sel.LinkTypes}}})
	}
	if len(res.Pools) > 0 {
		res.note("unit kept: one unit of each resource still gives a pod every port its entry selects on the node (the node's device legacy-<pool>), "+
			"and at most rdmaHcaMax pods hold it at once (maxPods); the legacy pools need the node configuration's legacyResources, which %s or %s write",
			FlagValuesOut, FlagNodeConfigOut)
	}
	res.check()
	return res, nil
}

// rdmaHcaMax checks an entry's rdmaHcaMax, the number of units the plugin advertised per
// node, and returns it as the legacy resource's maxPods.
func rdmaHcaMax(res *Result, where string, v *int) (int, bool) {
	const field = "rdmaHcaMax"
	switch {
	case v == nil:
		res.problem(where, field, "", "missing: the plugin advertises rdmaHcaMax units of the resource per node and has no default (unset is 0), so no pod ever got this resource; "+
			"set it to how many pods may share the entry's HCAs (1 to %d) or remove the entry", nodeconfig.MaxLegacyPods)
	case *v == 0:
		res.problem(where, field, "", "0: the plugin advertises rdmaHcaMax units of the resource per node, so with 0 no pod ever got this resource; "+
			"set it to how many pods may share the entry's HCAs (1 to %d) or remove the entry", nodeconfig.MaxLegacyPods)
	case *v < 0:
		res.problem(where, field, "", "%d: the plugin refuses a negative rdmaHcaMax (\"Invalid value for rdmaHcaMax < 0\"), so it never served this resource; set it to 1 to %d",
			*v, nodeconfig.MaxLegacyPods)
	case *v > nodeconfig.MaxLegacyPods:
		res.problem(where, field, "", "%d is more than a legacy resource takes (maxPods at most %d): as many pods would not fit on a node anyway; set it to at most %d",
			*v, nodeconfig.MaxLegacyPods, nodeconfig.MaxLegacyPods)
	default:
		return *v, true
	}
	return 0, false
}

func nonEmpty(s string) bool { return s != "" }

// literalWant says what literal accepts.
const literalWant = "a literal name (the plugin compares names exactly; a pool reads *, ? and [ as a pattern)"

// literal accepts a non-empty value without shell pattern characters: the plugins
// compare names and addresses exactly, a pool matches them as patterns, so "ib*" would
// select more than the plugin did.
func literal(s string) bool { return s != "" && !strings.ContainsAny(s, "*?[") }

package migrate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// SharedDevicePluginPrefix is the resource prefix k8s-rdma-shared-dev-plugin uses when
// an entry has no resourcePrefix.
const SharedDevicePluginPrefix = "rdma"

// The CLI flags that choose the input kind, named in hints for the wrong one.
const (
	FlagShared = "--from-shared-dev-plugin"
	FlagSRIOV  = "--from-sriov-device-plugin"
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
	RdmaHcaMax     int             `json:"rdmaHcaMax"`
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

// FromSharedDevicePlugin converts a k8s-rdma-shared-dev-plugin configuration (config.json,
// a ConfigMap or a NicClusterPolicy) into shared pools, one per configList entry, each
// serving the entry's extended resource name.
func FromSharedDevicePlugin(data []byte, opts Options) (*Result, error) {
	raw, where, err := configJSON(data, "rdmaSharedDevicePlugin", "sriovDevicePlugin", FlagSRIOV)
	if err != nil {
		return nil, err
	}
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
	res.note("unit semantics: one unit of a k8s-rdma-shared-dev-plugin resource gave a pod every HCA the entry selects on its node; " +
		"one unit of the same extended resource served by an RdmaPool is one share of one port. A pod that needs all ports " +
		"should use a ResourceClaim on the pool's DeviceClass with allocationMode: All (or exactly.count: <ports per node>) instead of resources.limits")
	defaultPrefix := opts.ResourcePrefix
	if defaultPrefix == "" {
		defaultPrefix = SharedDevicePluginPrefix
	}
	taken := map[string]bool{}
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
		var sel sharedSelectors
		if len(e.Selectors) > 0 && string(e.Selectors) != "null" {
			if err := decode(e.Selectors, &sel, where+" selectors"); err != nil {
				return nil, err
			}
		}
		c := &entryConverter{res: res, opts: opts, entry: where, resourceName: e.ResourceName}
		for _, k := range unknownKeys(e.Selectors, sharedSelectorFields...) {
			c.dropped("selectors."+k, fmt.Sprintf("unknown selector field %q: if a plugin version knows it, it narrowed the selection", k))
		}
		prefix := e.ResourcePrefix
		if prefix == "" {
			prefix = defaultPrefix
		}
		p := newPool(poolName(e.ResourceName, taken), v1alpha1.PoolModeShared, prefix+"/"+e.ResourceName)
		s := &p.Spec.Selectors
		s.Vendors = c.values(sel.Vendors, "selectors.vendors", "a PCI vendor ID of four hex digits", validHexID)
		s.DeviceIDs = c.values(sel.DeviceIDs, "selectors.deviceIDs", "a PCI device ID of four hex digits", validHexID)
		s.Drivers = c.values(sel.Drivers, "selectors.drivers", "a driver name", nonEmpty)
		s.IfNames = c.values(sel.IfNames, "selectors.ifNames", literalWant, literal)
		devices := c.values(e.Devices, "devices", literalWant, literal)
		for _, d := range devices {
			if !slices.Contains(s.IfNames, d) {
				s.IfNames = append(s.IfNames, d)
			}
		}
		if len(devices) > 0 {
			res.note("%s: devices %v became ifNames, which the plugin treats the same", where, devices)
		}
		if len(s.IfNames) > 0 {
			res.note("pool %s: ifNames now match each port's netdev as discovery reports it: the bond for a bonded or LAG port, where the plugin matched the PCI function's own interface; check with --dry-run-against-node", p.Name)
		}
		s.LinkTypes = toLinkTypes(c.values(sel.LinkTypes, "selectors.linkTypes", "a link type (infiniband, ether, IB, ETH)", validLinkType))
		if len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.IfNames)+len(s.LinkTypes) == 0 {
			res.note("pool %s: no selectors, as in the entry: it selects every RDMA port of every node, soft-RoCE and other devices without a PCI function included", p.Name)
		}
		if e.RdmaHcaMax > 0 {
			res.note("pool %s: rdmaHcaMax %d capped how many pods shared the entry's HCAs on a node; an RdmaPool has no such cap: "+
				"every port has rdma.dra.io/shares (the kubelet plugin's nodeConfig.shares, default 16) and a pod takes one share per unit",
				p.Name, e.RdmaHcaMax)
		}
		res.Pools = append(res.Pools, p)
		res.Entries = append(res.Entries, Entry{Plugin: PluginShared, Resource: prefix + "/" + e.ResourceName, Pool: p.Name,
			Sets: []PluginSelector{{Vendors: sel.Vendors, DeviceIDs: sel.DeviceIDs, Drivers: sel.Drivers,
				IfNames: append(slices.Clone(sel.IfNames), e.Devices...), LinkTypes: sel.LinkTypes}}})
	}
	res.check()
	return res, nil
}

func nonEmpty(s string) bool { return s != "" }

// literalWant says what literal accepts.
const literalWant = "a literal name (the plugin compares names exactly; a pool reads *, ? and [ as a pattern)"

// literal accepts a non-empty value without shell pattern characters: the plugins
// compare names and addresses exactly, a pool matches them as patterns, so "ib*" would
// select more than the plugin did.
func literal(s string) bool { return s != "" && !strings.ContainsAny(s, "*?[") }

package migrate

import (
	"fmt"
	"slices"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// SharedDevicePluginPrefix is the resource prefix k8s-rdma-shared-dev-plugin uses when
// an entry has no resourcePrefix.
const SharedDevicePluginPrefix = "rdma"

// sharedConfig is the k8s-rdma-shared-dev-plugin's config.json.
type sharedConfig struct {
	PeriodicUpdateInterval *int          `json:"periodicUpdateInterval"`
	KubeletRootDir         string        `json:"kubeletRootDir"`
	ConfigList             []sharedEntry `json:"configList"`
}

type sharedEntry struct {
	ResourceName   string          `json:"resourceName"`
	ResourcePrefix string          `json:"resourcePrefix"`
	RdmaHcaMax     int             `json:"rdmaHcaMax"`
	Devices        []string        `json:"devices"`
	Selectors      sharedSelectors `json:"selectors"`
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
func FromSharedDevicePlugin(data []byte) (*Result, error) {
	raw, where, err := configJSON(data, "rdmaSharedDevicePlugin")
	if err != nil {
		return nil, err
	}
	res := &Result{}
	var cfg sharedConfig
	if err := decodeStrict(raw, &cfg, res, where); err != nil {
		return nil, err
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
	taken := map[string]bool{}
	for i, e := range cfg.ConfigList {
		where := fmt.Sprintf("configList[%d] (%s)", i, e.ResourceName)
		if e.ResourceName == "" {
			res.note("%s: no resourceName; skipped", where)
			continue
		}
		prefix := e.ResourcePrefix
		if prefix == "" {
			prefix = SharedDevicePluginPrefix
		}
		p := newPool(poolName(e.ResourceName, taken), v1alpha1.PoolModeShared, prefix+"/"+e.ResourceName)
		s := &p.Spec.Selectors
		s.Vendors = hexIDs(e.Selectors.Vendors, res, where, "vendors")
		s.DeviceIDs = hexIDs(e.Selectors.DeviceIDs, res, where, "deviceIDs")
		s.Drivers = slices.Clone(e.Selectors.Drivers)
		s.IfNames = slices.Clone(e.Selectors.IfNames)
		for _, d := range e.Devices {
			if !slices.Contains(s.IfNames, d) {
				s.IfNames = append(s.IfNames, d)
			}
		}
		if len(e.Devices) > 0 {
			res.note("%s: devices %v became ifNames, which the plugin treats the same", where, e.Devices)
		}
		s.LinkTypes = linkTypes(e.Selectors.LinkTypes, res, where)
		if len(s.Vendors)+len(s.DeviceIDs)+len(s.Drivers)+len(s.IfNames)+len(s.LinkTypes) == 0 {
			res.note("pool %s: no selectors, so it selects every RDMA port of every node", p.Name)
		}
		if e.RdmaHcaMax > 0 {
			res.note("pool %s: rdmaHcaMax %d capped how many pods shared the entry's HCAs on a node; an RdmaPool has no such cap: "+
				"every port has rdma.dra.io/shares (the kubelet plugin's nodeConfig.shares, default 16) and a pod takes one share per unit",
				p.Name, e.RdmaHcaMax)
		}
		res.Pools = append(res.Pools, p)
	}
	res.check()
	return res, nil
}

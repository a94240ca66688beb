package devicemodel

import (
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// The binding conditions of a device whose port the node configuration gates
// (nodeconfig.FabricReadiness, KEP-5007). The scheduler binds the pod of a claim that
// got such a device only once the kubelet plugin has set FabricReadyCondition to True in
// the claim's status.devices entry of the device, and gives up on the node when it sets
// FabricFailedCondition. Their domain is fixed, like that of the attributes: a claim's
// status entry names its driver anyway.
const (
	// FabricReadyCondition is True once every port of the device is ready for traffic.
	FabricReadyCondition = AttributeDomain + "/FabricReady"
	// FabricFailedCondition is True when the ports did not become ready in time; its
	// message says what was missing.
	FabricFailedCondition = AttributeDomain + "/FabricFailed"
)

// gateFabric gives the devices of the gated ports their binding conditions and marks
// them in Result.Devices: every device of a gated port (exclusive, shared, legacy
// single-share), and a legacy resource's device when any of its ports is gated (a job
// of that shape needs every rail). It adds no device and consumes no counter, so the
// device model, its counters and the legacy model stay as they are.
func gateFabric(groups []portGroup, devices map[string]Device, cfg *nodeconfig.FabricReadiness) {
	if !cfg.Enabled {
		return
	}
	for gi := range groups {
		g := &groups[gi]
		for i := range g.devices {
			d := &g.devices[i]
			meta := g.meta[d.Name]
			ports := meta.AllPorts()
			if !slices.ContainsFunc(ports, func(p discovery.Port) bool { return cfg.Gates(&p) }) {
				continue
			}
			d.BindingConditions = []string{FabricReadyCondition}
			d.BindingFailureConditions = []string{FabricFailedCondition}
			meta.FabricGated = true
			g.meta[d.Name] = meta
			devices[d.Name] = meta
		}
	}
}

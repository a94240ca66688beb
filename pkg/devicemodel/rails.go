package devicemodel

import (
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Rails come from the node configuration (nodeconfig.Rail): nothing a node can read
// without querying the fabric says which leaf switch a port is cabled to. Every device of
// a port carries its rail (AttrRail), so that a claim can ask for one port per rail
// (distinctAttribute) or for ports of one rail (matchAttribute); a legacy resource's
// device carries it when all its ports are on the same rail.

// portRail returns the rail of port p, nil when it has none. A port that entries of two
// rails match gets none, and the conflict is returned as an issue: the configuration is
// at fault, and a port on a rail it may not be on would pair the wrong ports.
func portRail(cfg *nodeconfig.Config, p *discovery.Port) (*int, *Issue) {
	rail, ok, err := cfg.RailOf(p)
	if err != nil {
		return nil, &Issue{IBDev: p.IBDev, Port: p.Port, Attribute: AttrRail, Reason: err.Error(), ConfigConflict: true}
	}
	if !ok {
		return nil, nil
	}
	return &rail, nil
}

// commonRail returns the rail that all ports share, nil when one has none or two differ.
// A conflict was reported with the port's own devices.
func commonRail(cfg *nodeconfig.Config, ports []discovery.Port) *int {
	var common *int
	for i := range ports {
		rail, _ := portRail(cfg, &ports[i])
		if rail == nil || (common != nil && *common != *rail) {
			return nil
		}
		common = rail
	}
	return common
}

package devicemodel

import (
	"fmt"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// The ports of one RDMA device share its uverbs character device (/dev/infiniband/uverbsN),
// and whoever opens it can drive every port of the device. On mlx5 adapters every port is
// a PCI function and an RDMA device of its own, but a dual-port mlx4 VPI adapter or a
// Chelsio T5/T6 (iw_cxgb4, up to four ports) has one RDMA device for all its ports. An
// exclusive device gives its claim the uverbs node, so it must keep every other claim off
// every port of its RDMA device, not only off its own port:
//
//   - Default model: an RDMA device with n >= 2 published ports has one counter set, named
//     after the device (RDMADeviceName: mlx4_0 is "mlx4-0"), holding hca: n. An exclusive
//     device consumes all n, a shared device 1 (once, however many shares are out): an
//     exclusive device excludes everything else on the RDMA device, and shared devices of
//     all its ports fit together. One counter set per RDMA device, and not the counter
//     sets of all sibling ports, because a device may consume from at most
//     ResourceSliceMaxDeviceCounterConsumptionsPerDevice (2) counter sets, and so any
//     number of ports is covered. With exclusive devices only, such an RDMA device needs
//     the counter set too; with shared devices only, it needs none.
//   - An RDMA device with one published port, which is every mlx5 port, is published as
//     it always was: counter set <name> holding hca: 1 when the port has both devices,
//     none otherwise. Published ports are those the node configuration selects: a port
//     it leaves out is left to the host, and is not counted.
//   - Legacy model: there are no counters, so of an RDMA device's ports only the first
//     published one gets an exclusive device (legacy exclusive mode, which is also the
//     exclusive RDMA netns mode); the other ports are not published and are reported.
//     Single-share devices are shared by design and are published for every port.
//
// The plugin's prepare guard applies the same rule (ExclusiveConflict).

// buildRDMADevice makes the devices of the selected ports of one RDMA device, in port
// order, and reports the ports it cannot publish. The counter set of the RDMA device, if
// it has one, goes with the first port group.
//
// lc says whether legacy resources take the RDMA device (legacy.go): then its counter, if
// it needs one, goes to the node's legacy counter set lc.set, so that a legacy device can
// consume the counters of many RDMA devices from at most two sets, and it is returned.
func buildRDMADevice(ports []discovery.Port, netns discovery.NetnsMode, opts Options, usedNames map[string]string, lc legacyCounter) ([]portGroup, *counterRef, []Issue) {
	cfg := portConfig(opts.Config, netns)
	// Without counters nothing keeps two exclusive devices of one RDMA device apart.
	oneExclusive := opts.Legacy && cfg.Legacy.Mode == nodeconfig.LegacyModeExclusive

	type planned struct {
		port  *discovery.Port
		key   string
		plans []devicePlan
	}
	var kept []planned
	var issues []Issue
	for i := range ports {
		p := &ports[i]
		if oneExclusive && len(kept) > 0 && kept[0].port.Port != p.Port {
			issues = append(issues, Issue{IBDev: p.IBDev, Port: p.Port, Reason: fmt.Sprintf(
				"port %d is the RDMA device's exclusive device: its ports share one uverbs device, and without counters (legacy model) exclusive devices of two ports could go to two claims",
				kept[0].port.Port)})
			continue
		}
		key := DeviceName(p.IBDev, p.Port)
		plans := planDevices(key, cfg, opts.Legacy)
		if err := reserveNames(planNames(key, plans), fmt.Sprintf("%s port %d", p.IBDev, p.Port), usedNames); err != nil {
			issues = append(issues, Issue{IBDev: p.IBDev, Port: p.Port, Reason: err.Error()})
			continue
		}
		kept = append(kept, planned{port: p, key: key, plans: plans})
	}

	// set is the RDMA device's own counter set, published with its first port; ref is
	// the counter its devices consume, in set or in the node's legacy counter set.
	var set *resourceapi.CounterSet
	var ref *counterRef
	// counterName is the name of the RDMA device's counter set, or of its counter in the
	// legacy counter set: the port's key for one port, else the RDMA device's name.
	counterName := func() (string, []Issue) {
		if len(kept) == 1 {
			return kept[0].key, nil
		}
		name := RDMADeviceName(ports[0].IBDev)
		if err := reserveNames([]string{name}, "RDMA device "+ports[0].IBDev, usedNames); err != nil {
			// Its ports cannot be published without it: give their names back.
			var issues []Issue
			for _, k := range kept {
				for _, n := range planNames(k.key, k.plans) {
					delete(usedNames, n)
				}
				issues = append(issues, Issue{IBDev: k.port.IBDev, Port: k.port.Port,
					Reason: fmt.Sprintf("the counter set %q of the RDMA device's ports is not usable: %v", name, err)})
			}
			return "", issues
		}
		return name, nil
	}
	switch {
	case opts.Legacy || len(kept) == 0:
		// No counters.
	case lc.extra > 0 && cfg.Modes != nodeconfig.ModesShared:
		// Legacy devices consume one unit each, like a shared device, and an exclusive
		// device consumes them all.
		name, failed := counterName()
		if failed != nil {
			issues = append(issues, failed...)
			sortIssuesByPort(issues)
			return nil, nil, issues
		}
		shared := 0
		if cfg.Modes == nodeconfig.ModesBoth {
			shared = len(kept)
		}
		ref = &counterRef{set: lc.set, counter: name, value: shared + lc.extra}
	case len(kept) == 1 && cfg.Modes == nodeconfig.ModesBoth:
		set = newCounterSet(kept[0].key, 1)
	case len(kept) > 1 && cfg.Modes != nodeconfig.ModesShared:
		name, failed := counterName()
		if failed != nil {
			issues = append(issues, failed...)
			sortIssuesByPort(issues)
			return nil, nil, issues
		}
		set = newCounterSet(name, len(kept))
	}
	if set != nil {
		ref = &counterRef{set: set.Name, counter: Counter, value: len(kept)}
		if len(kept) == 1 {
			ref.value = 1
		}
	}

	groups := make([]portGroup, 0, len(kept))
	for i, k := range kept {
		rail, railIssue := portRail(&opts.Config, k.port)
		if railIssue != nil {
			issues = append(issues, *railIssue)
		}
		attrsByMode, attrIssues := modeAttributes(k.port, netns, rail, opts.DriverName)
		issues = append(issues, attrIssues...)
		taints := portTaints(k.port, opts.Flapping)
		g := portGroup{meta: make(map[string]Device, len(k.plans))}
		if i == 0 {
			g.counterSet = set
		}
		for _, pl := range k.plans {
			g.devices = append(g.devices, newDevice(pl, attrsByMode[pl.mode], taints, ref, opts.Legacy))
			g.meta[pl.name] = Device{Name: pl.name, Port: *k.port, Mode: pl.mode, MaxShares: pl.maxShares, ShareIndex: pl.shareIndex, PortKey: k.key,
				Attributes: attrsByMode[pl.mode]}
		}
		g.port = k.port
		groups = append(groups, g)
	}
	sortIssuesByPort(issues)
	if ref != nil && ref.set != lc.set {
		ref = nil // the RDMA device's own set: nothing for the caller
	}
	return groups, ref, issues
}

// sortIssuesByPort keeps Result.Issues sorted by port: the issues of one RDMA device are
// found in two passes. The sort is stable, so a port's attributes keep their order.
func sortIssuesByPort(issues []Issue) {
	slices.SortStableFunc(issues, func(a, b Issue) int { return a.Port - b.Port })
}

// newCounterSet is the counter set name with Counter = ports: one unit per published port
// of the RDMA device it stands for.
func newCounterSet(name string, ports int) *resourceapi.CounterSet {
	return &resourceapi.CounterSet{
		Name:     name,
		Counters: map[string]resourceapi.Counter{Counter: {Value: counterValue(ports)}},
	}
}

// counterRef is the counter that the devices of one RDMA device consume: counter of
// counter set set, holding value.
type counterRef struct {
	set, counter string
	value        int
}

// counterConsumption is what a device of mode consumes of ref: an exclusive device all of
// it, every port of the RDMA device; a shared device one port's unit.
func counterConsumption(ref *counterRef, mode Mode) []resourceapi.DeviceCounterConsumption {
	value := counterValue(1)
	if mode == ModeExclusive {
		value = counterValue(ref.value)
	}
	return []resourceapi.DeviceCounterConsumption{{
		CounterSet: ref.set,
		Counters:   map[string]resourceapi.Counter{ref.counter: {Value: value}},
	}}
}

// counterValue is n as a quantity, parsed from its text as the model always made its
// counters, so that a single-port RDMA device's counters are the same values as before,
// down to the cached string.
func counterValue(n int) apiresource.Quantity {
	return apiresource.MustParse(strconv.Itoa(n))
}

// Holding is a device as a claim holds it on the node: what ExclusiveConflict compares.
type Holding struct {
	// IBDev is the RDMA device; empty when unknown.
	IBDev string
	// PortKey is the port (the name of its exclusive device); empty when unknown.
	PortKey string
	// Exclusive is true for an exclusive device.
	Exclusive bool
}

// ExclusiveConflict says why the devices want and held cannot be prepared for two
// different claims because one of them is exclusive, or "" when exclusivity does not
// keep them apart (shares and share counts are for the caller to check). An exclusive
// device needs its port to itself and, since the ports of an RDMA device share its
// uverbs device, every other port of its RDMA device too, in every model. It is the
// prepare-time twin of the counters the model publishes, for allocations the scheduler
// should never have made.
func ExclusiveConflict(want, held Holding) string {
	if !want.Exclusive && !held.Exclusive {
		return ""
	}
	samePort := want.PortKey != "" && want.PortKey == held.PortKey
	sameDevice := want.IBDev != "" && want.IBDev == held.IBDev
	switch {
	case samePort && want.Exclusive:
		return "an exclusive device needs its port to itself"
	case samePort:
		return "the port is held exclusively"
	case sameDevice && want.Exclusive:
		return fmt.Sprintf("an exclusive device needs every port of its RDMA device %s to itself: they share one uverbs device", want.IBDev)
	case sameDevice:
		return fmt.Sprintf("another port of RDMA device %s is held exclusively, and its ports share one uverbs device", held.IBDev)
	}
	return ""
}

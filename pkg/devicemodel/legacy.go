package devicemodel

import (
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Legacy resources (nodeconfig.LegacyResource) keep the unit of k8s-rdma-shared-dev-plugin:
// one allocation is every port an entry selects on the node, shared by up to MaxPods
// claims. Each entry is published as one device, legacy-<name>, of mode legacy:
//
//   - It is multi-allocatable with the capacity rdma.dra.io/shares = MaxPods (a claim
//     takes one unless it asks for more), so claim MaxPods + 1 stays pending.
//   - It stands for the published ports its selectors match; the plugin prepares them
//     all (their uverbs nodes, NCCL_IB_HCA listing each).
//   - It coexists with the shares of its ports: a legacy pod shares the HCAs, as it did
//     under the device plugin. An exclusive (whole-port) device and a legacy device that
//     takes its port exclude each other, in both orders.
//
// The exclusion is made with counters, as between a port's exclusive and shared devices.
// The counter of an RDMA device that a legacy resource takes moves from the device's own
// counter set into the node's legacy counter sets (rdma-legacy-<i>, 32 counters
// each, named after the RDMA device's own set), because a device may consume from at
// most two counter sets: so a legacy device covers up to 64 such RDMA devices. The
// counter holds one unit per shared device of the RDMA device's ports plus one per legacy
// resource taking it; shared and legacy devices consume one unit each, exclusive devices
// all of them. That is the default model's rule (one unit per shared device, an exclusive
// device takes all) with the legacy devices as further shared consumers, so nodes
// without legacy resources publish exactly what they did before.
//
// The legacy model (no counters, no multi-allocation) and the kernel's exclusive RDMA
// netns mode (an RDMA device is in one pod's namespace at a time) cannot express this;
// there legacy resources are not published, and each is reported.

// legacyCounterSetName is the name of the node's i-th legacy counter set.
// It cannot be a legacy device's name (legacy-<name>); a port whose names it would take
// is not published, like any port whose names are taken.
func legacyCounterSetName(i int) string { return fmt.Sprintf("rdma-legacy-%d", i) }

// legacyCounter is what the legacy resources ask of one RDMA device's counters.
type legacyCounter struct {
	// extra is how many legacy resources take a port of the RDMA device.
	extra int
	// set is the legacy counter set its counter goes to.
	set string
}

// legacyPlan is the legacy resources of a node while Build runs.
type legacyPlan struct {
	resources []nodeconfig.LegacyResource
	// extra counts, per ibdev, the resources that take one of its selected ports.
	extra map[string]int
	// refs are the counters in the legacy sets, in order; byIBDev indexes them.
	refs    []*counterRef
	byIBDev map[string]*counterRef
	issues  []Issue
	// flapping are the ports that flap (Options.Flapping).
	flapping map[PortID]string
	// config is the node configuration, for the ports' rails.
	config *nodeconfig.Config
}

// planLegacy reserves the names of the legacy devices and counter sets before any port
// takes them, and counts which RDMA devices the resources take.
func planLegacy(ports []discovery.Port, netns discovery.NetnsMode, opts Options, usedNames map[string]string) *legacyPlan {
	lp := &legacyPlan{extra: map[string]int{}, byIBDev: map[string]*counterRef{}, flapping: opts.Flapping, config: &opts.Config}
	resources := opts.Config.LegacyResources
	if len(resources) == 0 {
		return lp
	}
	var why string
	switch {
	case opts.Legacy:
		why = "the legacy device model has no shared counters and no multi-allocatable devices to keep a legacy resource's ports and pods apart"
	case netns == discovery.NetnsModeExclusive:
		why = "in the kernel's exclusive RDMA netns mode an RDMA device is in one pod's network namespace at a time, so its ports cannot be shared"
	}
	for _, r := range resources {
		if why != "" {
			lp.issues = append(lp.issues, Issue{LegacyResource: r.Name, Reason: why})
			continue
		}
		if err := reserveNames([]string{r.DeviceName()}, "legacy resource "+r.Name, usedNames); err != nil {
			lp.issues = append(lp.issues, Issue{LegacyResource: r.Name, Reason: err.Error()})
			continue
		}
		lp.resources = append(lp.resources, r)
		taken := map[string]bool{}
		for i := range ports {
			if p := &ports[i]; !taken[p.IBDev] && r.Matches(p) {
				taken[p.IBDev] = true
				lp.extra[p.IBDev]++
			}
		}
	}
	// One name per 32 counters; a name a port already took would be reported there, so
	// the sets are reserved now, before the ports.
	for i := range (len(lp.extra) + resourceapi.ResourceSliceMaxCountersPerCounterSet - 1) / resourceapi.ResourceSliceMaxCountersPerCounterSet {
		name := legacyCounterSetName(i)
		// Only the legacy device names are reserved yet, and none of them is rdma-legacy-<i>.
		usedNames[name] = "the legacy resources' counter set"
	}
	return lp
}

// counterFor is what buildRDMADevice needs for the RDMA device ibdev.
func (lp *legacyPlan) counterFor(ibdev string) legacyCounter {
	n := lp.extra[ibdev]
	if n == 0 {
		return legacyCounter{}
	}
	return legacyCounter{extra: n, set: legacyCounterSetName(len(lp.refs) / resourceapi.ResourceSliceMaxCountersPerCounterSet)}
}

// addCounter records the counter the RDMA device ibdev got in a legacy set, if any.
func (lp *legacyPlan) addCounter(ibdev string, ref *counterRef) {
	if ref == nil {
		return
	}
	lp.refs = append(lp.refs, ref)
	lp.byIBDev[ibdev] = ref
}

// build makes the legacy counter sets and devices once the ports are built: a group per
// counter set, then one group with the legacy devices.
func (lp *legacyPlan) build(groups []portGroup, netns discovery.NetnsMode, driverName string) ([]portGroup, []Issue) {
	issues := slices.Clone(lp.issues)
	if len(lp.resources) == 0 {
		return nil, issues
	}
	var out []portGroup
	var set *resourceapi.CounterSet
	for _, ref := range lp.refs {
		if set == nil || set.Name != ref.set {
			out = append(out, portGroup{counterSet: &resourceapi.CounterSet{Name: ref.set, Counters: map[string]resourceapi.Counter{}}})
			set = out[len(out)-1].counterSet
		}
		set.Counters[ref.counter] = resourceapi.Counter{Value: counterValue(ref.value)}
	}

	var published []*discovery.Port
	for i := range groups {
		if groups[i].port != nil {
			published = append(published, groups[i].port)
		}
	}
	devs := portGroup{meta: map[string]Device{}}
	for _, r := range lp.resources {
		var covered []discovery.Port
		for _, p := range published {
			if r.Matches(p) {
				covered = append(covered, *p)
			}
		}
		if len(covered) == 0 {
			issues = append(issues, Issue{LegacyResource: r.Name, Reason: "its selectors match no port the node publishes"})
			continue
		}
		consumes, err := lp.consumption(covered)
		if err != nil {
			issues = append(issues, Issue{LegacyResource: r.Name, Reason: err.Error()})
			continue
		}
		attrs := onWire(legacyAttributes(r.Name, covered, netns, commonRail(lp.config, covered)), driverName)
		d := resourceapi.Device{
			Name:                     r.DeviceName(),
			Attributes:               attrs,
			Capacity:                 sharesCapacity(r.MaxPods),
			AllowMultipleAllocations: ptr.To(true),
			ConsumesCounters:         consumes,
			Taints:                   legacyTaints(covered, lp.flapping),
		}
		devs.devices = append(devs.devices, d)
		devs.meta[d.Name] = Device{Name: d.Name, Port: covered[0], Ports: covered, Mode: ModeLegacy, MaxShares: r.MaxPods,
			PortKey: d.Name, Attributes: attrs}
	}
	if len(devs.devices) > 0 {
		out = append(out, devs)
	}
	return out, issues
}

// consumption is what a legacy device of the covered ports consumes: one unit of the
// counter of each RDMA device that has one, from at most two counter sets.
func (lp *legacyPlan) consumption(covered []discovery.Port) ([]resourceapi.DeviceCounterConsumption, error) {
	var out []resourceapi.DeviceCounterConsumption
	seen := map[string]bool{}
	for i := range covered {
		ref := lp.byIBDev[covered[i].IBDev]
		if ref == nil || seen[covered[i].IBDev] {
			continue
		}
		seen[covered[i].IBDev] = true
		if len(out) == 0 || out[len(out)-1].CounterSet != ref.set {
			if len(out) == resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice {
				return nil, fmt.Errorf("it takes RDMA devices with whole-port devices from more than %d counter sets of %d counters: narrow its selectors, or publish those ports in shared mode only",
					resourceapi.ResourceSliceMaxDeviceCounterConsumptionsPerDevice, resourceapi.ResourceSliceMaxCountersPerCounterSet)
			}
			out = append(out, resourceapi.DeviceCounterConsumption{CounterSet: ref.set, Counters: map[string]resourceapi.Counter{}})
		}
		out[len(out)-1].Counters[ref.counter] = resourceapi.Counter{Value: counterValue(1)}
	}
	return out, nil
}

// legacyTaints taints a legacy device while any of its ports is not ACTIVE or flaps: a
// pod of the device plugin's unit expects every port (rail), and one missing would
// silently cut its bandwidth. Each taint is that of the first port that has it; they are
// sorted by key.
func legacyTaints(covered []discovery.Port, flapping map[PortID]string) []resourceapi.DeviceTaint {
	var out []resourceapi.DeviceTaint
	for i := range covered {
		for _, t := range portTaints(&covered[i], flapping) {
			if !slices.ContainsFunc(out, func(o resourceapi.DeviceTaint) bool { return o.Key == t.Key }) {
				out = append(out, t)
			}
		}
	}
	slices.SortFunc(out, func(a, b resourceapi.DeviceTaint) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// The attributes only legacy devices have; AttrMode, AttrLinkLayer and AttrRDMANetns
// they share with the port devices.
const (
	AttrLegacyResource resourceapi.QualifiedName = AttributeDomain + "/legacy_resource"
	AttrPorts          resourceapi.QualifiedName = AttributeDomain + "/ports"
)

// legacyAttributeList describes a legacy device's attributes, in documentation order;
// LegacyAttributes returns it and legacyAttributes computes them.
var legacyAttributeList = []Attribute{
	{Name: AttrMode, Type: TypeString, Example: "legacy",
		Description: "always legacy"},
	{Name: AttrLegacyResource, Type: TypeString, Example: "hca-shared-devices-a",
		Description: "the node configuration's legacyResources entry, the name of the RdmaPool that serves it"},
	{Name: AttrPorts, Type: TypeInt, Example: "8",
		Description: "how many ports one allocation gets: every published port the entry selects"},
	{Name: AttrLinkLayer, Type: TypeString, Example: "InfiniBand",
		Description: "the link layer of the ports; omitted when they differ or one is unknown"},
	{Name: AttrRDMANetns, Type: TypeString, Example: "shared",
		Description: "RDMA network namespace mode of the node (always shared: legacy devices need it)"},
	{Name: AttrRail, Type: TypeInt, Example: "0",
		Description: "the rail of the ports; omitted unless every port has the same rail"},
}

// LegacyAttributes returns the attributes of a legacy device, in documentation order.
func LegacyAttributes() []Attribute {
	return slices.Clone(legacyAttributeList)
}

// legacyAttributes are the attributes of the legacy device of resource name standing for
// covered, fully qualified; rail is the ports' common rail (commonRail).
func legacyAttributes(name string, covered []discovery.Port, netns discovery.NetnsMode, rail *int) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		AttrMode:           stringAttr(string(ModeLegacy)),
		AttrLegacyResource: stringAttr(name),
		AttrPorts:          intAttr(len(covered)),
	}
	ll := covered[0].LinkLayer
	for i := range covered {
		if covered[i].LinkLayer != ll {
			ll = ""
		}
	}
	if ll != "" && ll != discovery.LinkLayerUnknown {
		attrs[AttrLinkLayer] = stringAttr(ll)
	}
	if netns != discovery.NetnsModeUnknown {
		attrs[AttrRDMANetns] = stringAttr(string(netns))
	}
	if rail != nil {
		attrs[AttrRail] = intAttr(*rail)
	}
	return attrs
}

package devicemodel

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// DefaultDriverName is the driver's name; it is also the attribute domain.
const DefaultDriverName = "rdma.dra.io"

// PoolSuffix makes the default pool name of a node, NodeName + PoolSuffix. A pool name
// of its own keeps this driver's counters apart from another driver's pool of the same
// node (the 1.36 allocator keys counters by pool name).
const PoolSuffix = "-rdma"

// DefaultPoolName is the pool of a node when none is configured: NodeName + PoolSuffix
// for the default driver, as in earlier versions, and NodeName + "-" + driverName for
// any other, so that a second installation of the driver on the same node (another
// driver name) does not share the pool name, which the 1.36 allocator would take for the
// same counters.
func DefaultPoolName(nodeName, driverName string) string {
	if driverName == "" || driverName == DefaultDriverName {
		return nodeName + PoolSuffix
	}
	return nodeName + "-" + driverName
}

// Mode says how a device hands out its port.
type Mode string

// The device modes, also the values of the rdma.dra.io/mode attribute.
const (
	ModeExclusive Mode = "exclusive"
	ModeShared    Mode = "shared"
	// ModeLegacy is the device of a legacy resource (nodeconfig.LegacyResource): every
	// port it selects, shared by up to its MaxPods claims.
	ModeLegacy Mode = "legacy"
)

// Counter is the one counter of a counter set. The set of a single-port RDMA device
// holds 1 and both devices of the port consume all of it, so at most one of them is
// allocated at a time. The set of an RDMA device with n published ports holds n: an
// exclusive device consumes all n, a shared device 1 (see buildRDMADevice).
const Counter = "hca"

// NotActiveTaintKey is the taint of both devices of a port that is not ACTIVE; its
// value is the port state (DOWN, INIT, ...) or Unknown.
const NotActiveTaintKey = AttributeDomain + "/port-not-active"

// FlappingTaintKey is the taint of both devices of a port that flaps, whatever its state
// now: its link went down repeatedly, or its lanes saw many symbol errors, within the
// node's window (nodeconfig.FlappingConfig, pkg/health). Its value names what was seen,
// FlappingLinkDowned or FlappingSymbolErrors; its effect is always NoSchedule.
const FlappingTaintKey = AttributeDomain + "/port-flapping"

// Values of the flapping taint.
const (
	FlappingLinkDowned   = "LinkDowned"
	FlappingSymbolErrors = "SymbolErrors"
)

// PortID names one port of one RDMA device.
type PortID struct {
	IBDev string
	Port  int
}

// Options configure Build.
type Options struct {
	// DriverName is the driver's name; default DefaultDriverName.
	DriverName string
	// NodeName is the node the devices are on. Required.
	NodeName string
	// PoolName is the pool of the node's devices; default DefaultPoolName.
	PoolName string
	// Legacy selects the legacy model: no counters, no multi-allocation.
	Legacy bool
	// Config is the node configuration; its zero value means nodeconfig.Default().
	Config nodeconfig.Config
	// Flapping are the ports to taint with FlappingTaintKey, with the taint's value;
	// the health monitor decides (pkg/health).
	Flapping map[PortID]string
}

// Result is what a node publishes.
type Result struct {
	// Resources holds one pool, Result.PoolName, ready for the resourceslice controller.
	Resources resourceslice.DriverResources
	// Devices maps every published device name to its port.
	Devices map[string]Device
	// DriverName, NodeName and PoolName are the defaulted options.
	DriverName, NodeName, PoolName string
	// Issues lists the ports that were not published and the attributes that were
	// omitted, sorted by port; LogIssues logs them.
	Issues []Issue
}

// Device is what the plugin needs to know about a published device.
type Device struct {
	// Name is the published device name.
	Name string
	// Port is the port the device hands out; the first of Ports for a legacy device.
	Port discovery.Port
	// Ports are all the ports a legacy device stands for, in port order; nil for the
	// devices of one port. AllPorts returns the list for either.
	Ports []discovery.Port
	// Mode is exclusive or shared.
	Mode Mode
	// MaxShares is the shared capacity of a shared device, 1 for a legacy single-share
	// device and 0 for an exclusive device.
	MaxShares int
	// ShareIndex is k of a legacy single-share device <name>-s<k>.
	ShareIndex int
	// PortKey is the name of the port's exclusive device: devices with the same
	// PortKey hand out the same port.
	PortKey string
	// FabricGated is true when the device carries the binding conditions of fabric
	// readiness (FabricReadyCondition): the node configuration gates one of its ports.
	FabricGated bool
	// Attributes are the device's attributes as published (names of the driver's own
	// domain unqualified when the driver runs under it). The map is shared with the
	// other devices of the port in the same mode: read it, never write it.
	Attributes map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
}

// AllPorts returns the ports the device stands for: Ports of a legacy device, else Port.
func (d *Device) AllPorts() []discovery.Port {
	if len(d.Ports) > 0 {
		return d.Ports
	}
	return []discovery.Port{d.Port}
}

// Issue is something Build left out.
type Issue struct {
	// LegacyResource names the legacy resource that was not published; empty for a
	// port's issue.
	LegacyResource string
	// IBDev and Port identify the port.
	IBDev string
	Port  int
	// Attribute is the omitted attribute; empty when the whole port was skipped.
	Attribute resourceapi.QualifiedName
	// Reason says why.
	Reason string
	// ConfigConflict is true when the node configuration is at fault (two rails match
	// the port): its admin has to fix it, so it is logged as an error.
	ConfigConflict bool
}

// LogIssues logs the issues: a skipped port as an error, an omitted attribute as
// information, because the device is still usable without it, unless the node
// configuration's conflict left it out (Issue.ConfigConflict), which is an error too.
func (r *Result) LogIssues(logger klog.Logger) {
	for _, is := range r.Issues {
		if is.LegacyResource != "" {
			logger.Error(nil, "Legacy resource not published", "legacyResource", is.LegacyResource, "reason", is.Reason)
			continue
		}
		if is.Attribute == "" {
			logger.Error(nil, "Port not published", "ibdev", is.IBDev, "port", is.Port, "reason", is.Reason)
			continue
		}
		if is.ConfigConflict {
			logger.Error(nil, "Device attribute omitted: the node configuration conflicts", "ibdev", is.IBDev, "port", is.Port, "attribute", is.Attribute, "reason", is.Reason)
			continue
		}
		logger.Info("Device attribute omitted", "ibdev", is.IBDev, "port", is.Port, "attribute", is.Attribute, "reason", is.Reason)
	}
}

// Build computes the devices a node publishes from its inventory. Ports the
// configuration does not select are left out silently; ports that cannot be published
// (an unusable name, a duplicate) are left out and reported in Result.Issues. Errors are
// reserved for invalid options. The output is deterministic: the same inventory and
// options give the same slices.
func Build(inv *discovery.Inventory, opts Options) (*Result, error) {
	if inv == nil {
		return nil, errors.New("build device model: no inventory")
	}
	opts, err := defaultOptions(opts)
	if err != nil {
		return nil, fmt.Errorf("build device model: %w", err)
	}
	res := &Result{
		Devices:    make(map[string]Device),
		DriverName: opts.DriverName,
		NodeName:   opts.NodeName,
		PoolName:   opts.PoolName,
	}

	ports := slices.Clone(inv.Ports)
	// Discovery keeps ports sorted; sorting again makes the output independent of that.
	slices.SortStableFunc(ports, discovery.ComparePorts)

	ports = slices.DeleteFunc(ports, func(p discovery.Port) bool { return !opts.Config.Selects(&p) })

	usedNames := make(map[string]string) // device or counter set name -> its port or RDMA device
	lp := planLegacy(ports, inv.NetnsMode, opts, usedNames)
	var groups []portGroup
	// The ports of one RDMA device are adjacent in sorted order, and they are built
	// together: they share the device's uverbs node, so exclusive is decided per device.
	for rest := ports; len(rest) > 0; {
		n := 1
		for n < len(rest) && rest[n].IBDev == rest[0].IBDev {
			n++
		}
		ibdev := rest[0].IBDev
		gs, ref, issues := buildRDMADevice(rest[:n], inv.NetnsMode, opts, usedNames, lp.counterFor(ibdev))
		rest = rest[n:]
		res.Issues = append(res.Issues, issues...)
		lp.addCounter(ibdev, ref)
		for _, g := range gs {
			for _, d := range g.devices {
				res.Devices[d.Name] = g.meta[d.Name]
			}
		}
		groups = append(groups, gs...)
	}
	legacyGroups, legacyIssues := lp.build(groups, inv.NetnsMode, opts.DriverName)
	res.Issues = append(res.Issues, legacyIssues...)
	for _, g := range legacyGroups {
		for _, d := range g.devices {
			res.Devices[d.Name] = g.meta[d.Name]
		}
	}
	groups = append(groups, legacyGroups...)
	gateFabric(groups, res.Devices, &opts.Config.FabricReadiness)

	res.Resources = resourceslice.DriverResources{
		Pools: map[string]resourceslice.Pool{opts.PoolName: {Slices: pack(groups)}},
	}
	return res, nil
}

func defaultOptions(opts Options) (Options, error) {
	if opts.DriverName == "" {
		opts.DriverName = DefaultDriverName
	}
	if opts.NodeName == "" {
		return opts, errors.New("node name is required")
	}
	if opts.PoolName == "" {
		opts.PoolName = DefaultPoolName(opts.NodeName, opts.DriverName)
	}
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(opts.DriverName); len(msgs) > 0 || len(opts.DriverName) > resourceapi.DriverNameMaxLength {
		errs = append(errs, fmt.Errorf("driver name %q must be a DNS subdomain of at most %d characters", opts.DriverName, resourceapi.DriverNameMaxLength))
	}
	if msgs := validation.IsDNS1123Subdomain(opts.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("node name %q: %s", opts.NodeName, strings.Join(msgs, "; ")))
	}
	if err := validatePoolName(opts.PoolName); err != nil {
		errs = append(errs, err)
	}
	opts.Config.SetDefaults()
	if fieldErrs := opts.Config.Validate(); len(fieldErrs) > 0 {
		errs = append(errs, fmt.Errorf("node config: %w", fieldErrs.ToAggregate()))
	}
	return opts, errors.Join(errs...)
}

// validatePoolName applies the API's rule: at most 253 characters, DNS subdomains
// separated by slashes.
func validatePoolName(name string) error {
	if len(name) > resourceapi.PoolNameMaxLength {
		return fmt.Errorf("pool name %q is longer than %d characters", name, resourceapi.PoolNameMaxLength)
	}
	for part := range strings.SplitSeq(name, "/") {
		if msgs := validation.IsDNS1123Subdomain(part); len(msgs) > 0 {
			return fmt.Errorf("pool name %q: %s", name, strings.Join(msgs, "; "))
		}
	}
	return nil
}

// portGroup is the devices of one port and the counter set they consume, if it is not
// published yet: the counter set of an RDMA device goes with its first port. A group is
// never split across slices.
type portGroup struct {
	devices    []resourceapi.Device
	counterSet *resourceapi.CounterSet
	meta       map[string]Device
	// port is the group's port; nil for the group of the legacy devices.
	port *discovery.Port
}

// portConfig is the node configuration as it applies to the ports of a node in netns mode.
func portConfig(cfg nodeconfig.Config, netns discovery.NetnsMode) nodeconfig.Config {
	if netns == discovery.NetnsModeExclusive {
		// In the kernel's exclusive RDMA netns mode a device is visible in one network
		// namespace at a time, the one the plugin moves it into: one pod per port, so
		// no shares (docs/network-attachment.md).
		cfg.Modes = nodeconfig.ModesExclusive
		cfg.Legacy.Mode = nodeconfig.LegacyModeExclusive
	}
	return cfg
}

// devicePlan is one device a port is to be published as.
type devicePlan struct {
	name       string
	mode       Mode
	maxShares  int
	shareIndex int
}

// planDevices returns the devices of the port whose exclusive device name is key: all
// names of the port, so that they are checked before anything is published and both
// devices of a port exist or neither does.
func planDevices(key string, cfg nodeconfig.Config, legacy bool) []devicePlan {
	var plans []devicePlan
	switch {
	case legacy && cfg.Legacy.Mode == nodeconfig.LegacyModeShared:
		for k := range cfg.Legacy.Shares {
			plans = append(plans, devicePlan{name: LegacyShareName(key, k), mode: ModeShared, maxShares: 1, shareIndex: k})
		}
	case legacy:
		plans = append(plans, devicePlan{name: key, mode: ModeExclusive})
	default:
		if cfg.Modes != nodeconfig.ModesShared {
			plans = append(plans, devicePlan{name: key, mode: ModeExclusive})
		}
		if cfg.Modes != nodeconfig.ModesExclusive {
			plans = append(plans, devicePlan{name: SharedDeviceName(key), mode: ModeShared, maxShares: cfg.Shares})
		}
	}
	return plans
}

// planNames are the names a port's plans take: the port key, which may name the port's
// counter set and must be unique too, and the planned devices' names.
func planNames(key string, plans []devicePlan) []string {
	names := []string{key}
	for _, pl := range plans {
		if pl.name != key {
			names = append(names, pl.name)
		}
	}
	return names
}

// reserveNames checks names and records them in usedNames for owner. It records nothing
// when one name is invalid or taken.
func reserveNames(names []string, owner string, usedNames map[string]string) error {
	for _, n := range names {
		if err := ValidateDeviceName(n); err != nil {
			return err
		}
		if other, dup := usedNames[n]; dup {
			return fmt.Errorf("device name %q is already used by %s", n, other)
		}
	}
	for _, n := range names {
		usedNames[n] = owner
	}
	return nil
}

// modeAttributes returns the port's attributes as published in each mode, and the
// attributes left out as issues, reported once since both modes share the facts. rail is
// the port's rail (portRail).
func modeAttributes(p *discovery.Port, netns discovery.NetnsMode, rail *int, driverName string) (map[Mode]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, []Issue) {
	in := attrInput{port: p, netns: netns, rail: rail}
	var issues []Issue
	attrsByMode := make(map[Mode]map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, 2)
	for _, m := range []Mode{ModeExclusive, ModeShared} {
		in.mode = m
		attrs, omitted := portAttributes(in)
		attrsByMode[m] = onWire(attrs, driverName)
		if m == ModeExclusive { // the same facts for both modes: report once
			for _, name := range sortedKeys(omitted) {
				issues = append(issues, Issue{IBDev: p.IBDev, Port: p.Port, Attribute: name, Reason: omitted[name]})
			}
		}
	}
	return attrsByMode, issues
}

// newDevice returns the API device of pl, with copies of attrs and taints so that no two
// devices alias. With a counter set it consumes from it (counterConsumption); a shared
// device of the default model has the shares capacity.
func newDevice(pl devicePlan, attrs map[resourceapi.QualifiedName]resourceapi.DeviceAttribute, taints []resourceapi.DeviceTaint, ref *counterRef, legacy bool) resourceapi.Device {
	d := resourceapi.Device{
		Name:       pl.name,
		Attributes: maps.Clone(attrs), // no aliasing between devices
		Taints:     slices.Clone(taints),
	}
	if ref != nil {
		d.ConsumesCounters = counterConsumption(ref, pl.mode)
	}
	if pl.mode == ModeShared && !legacy {
		d.AllowMultipleAllocations = ptr.To(true)
		d.Capacity = sharesCapacity(pl.maxShares)
	}
	return d
}

// sharesCapacity is the capacity of a shared device of maxShares shares: a claim takes
// one share unless it asks for more, and at most all of them.
func sharesCapacity(maxShares int) map[resourceapi.QualifiedName]resourceapi.DeviceCapacity {
	shares := apiresource.NewQuantity(int64(maxShares), apiresource.DecimalSI)
	return map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
		SharesCapacity: {
			Value: *shares,
			RequestPolicy: &resourceapi.CapacityRequestPolicy{
				Default: apiresource.NewQuantity(1, apiresource.DecimalSI),
				ValidRange: &resourceapi.CapacityRequestPolicyRange{
					Min: apiresource.NewQuantity(1, apiresource.DecimalSI),
					Max: shares,
				},
			},
		},
	}
}

// portTaints taints a port that is not ACTIVE or that flaps, so that it stays visible
// (autoscalers see the node's shape) but nothing is scheduled onto it. The taints are
// sorted by key.
func portTaints(p *discovery.Port, flapping map[PortID]string) []resourceapi.DeviceTaint {
	var taints []resourceapi.DeviceTaint
	if value, ok := flapping[PortID{p.IBDev, p.Port}]; ok {
		if value == "" || len(validation.IsValidLabelValue(value)) > 0 {
			value = "Unknown"
		}
		taints = append(taints, resourceapi.DeviceTaint{Key: FlappingTaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule})
	}
	if p.State != "ACTIVE" {
		value := p.State
		if value == "" || len(validation.IsValidLabelValue(value)) > 0 {
			value = "Unknown"
		}
		taints = append(taints, resourceapi.DeviceTaint{Key: NotActiveTaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule})
	}
	return taints
}

func sortedKeys[K cmp.Ordered, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

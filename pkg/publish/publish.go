package publish

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// Model is the --model choice.
type Model string

// Device models.
const (
	// ModelAuto publishes the partitionable model and falls back to legacy on this node
	// when the API server drops the fields it needs.
	ModelAuto Model = "auto"
	// ModelPartitionable always publishes exclusive and shared devices per port with
	// shared counters and consumable capacity.
	ModelPartitionable Model = "partitionable"
	// ModelLegacy always publishes the model that older clusters accept.
	ModelLegacy Model = "legacy"
)

// ParseModel checks a --model value.
func ParseModel(s string) (Model, error) {
	switch m := Model(s); m {
	case ModelAuto, ModelPartitionable, ModelLegacy:
		return m, nil
	}
	return "", fmt.Errorf("unknown device model %q, want auto, partitionable or legacy", s)
}

// Discoverer produces the node's inventory; *discovery.Discoverer implements it.
type Discoverer interface {
	Discover(ctx context.Context) (*discovery.Inventory, error)
}

// ResourcePublisher hands slices to the ResourceSlice controller;
// *kubeletplugin.Helper implements it.
type ResourcePublisher interface {
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

// Publisher keeps the node's ResourceSlices in line with its hardware: it discovers,
// builds the device model and publishes, and does it again only when the inventory (or
// the model) changed, so that a quiet node causes no API traffic.
type Publisher struct {
	discoverer  Discoverer
	opts        devicemodel.Options
	choice      Model
	metrics     *metrics.Plugin
	clock       clock.WithTicker
	limiter     *health.Limiter
	observer    ScanObserver
	taintEffect resourceapi.DeviceTaintEffect
	flapping    func() map[devicemodel.PortID]string

	// fallback is signalled when the node must switch to the legacy model.
	fallback chan struct{}

	mu        sync.Mutex
	sink      ResourcePublisher
	legacy    bool
	inventory *discovery.Inventory
	// flaps are the flapping ports the current model was built with.
	flaps     map[devicemodel.PortID]string
	published bool
	// current is the model being published; other is the other model of the same
	// inventory, so that claims allocated just before a switch still prepare.
	current, other *devicemodel.Result
}

// ScanObserver is told about every successful scan; *health.Monitor implements it. It
// is called with the publisher's lock held and must not block.
type ScanObserver interface {
	Observe(ctx context.Context, scan health.Scan)
}

// Options are the optional parts of a Publisher.
type Options struct {
	// Metrics receives the publisher's metrics; nil creates a private set.
	Metrics *metrics.Plugin
	// Clock times damping and republish latency; nil is the real clock.
	Clock clock.WithTicker
	// Limiter damps republishing in Run; nil never delays.
	Limiter *health.Limiter
	// Observer is told about every scan; nil is nobody.
	Observer ScanObserver
	// TaintEffect is the effect of the taint of a port that is not ACTIVE; empty is
	// NoSchedule.
	TaintEffect resourceapi.DeviceTaintEffect
	// Flapping returns the ports to taint as flapping (health.Monitor.Flapping); nil
	// taints none.
	Flapping func() map[devicemodel.PortID]string
}

// ParseTaintEffect checks a --taint-effect value.
func ParseTaintEffect(s string) (resourceapi.DeviceTaintEffect, error) {
	switch e := resourceapi.DeviceTaintEffect(s); e {
	case resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute, resourceapi.DeviceTaintEffectNone:
		return e, nil
	}
	return "", fmt.Errorf("unknown taint effect %q, want NoSchedule, NoExecute or None", s)
}

// New returns a publisher. opts.Legacy is ignored: choice decides the model.
func New(d Discoverer, opts devicemodel.Options, choice Model, po Options) *Publisher {
	if po.Metrics == nil {
		po.Metrics = metrics.NewPlugin()
	}
	if po.Clock == nil {
		po.Clock = clock.RealClock{}
	}
	if po.TaintEffect == "" {
		po.TaintEffect = resourceapi.DeviceTaintEffectNoSchedule
	}
	p := &Publisher{
		discoverer: d, opts: opts, choice: choice, metrics: po.Metrics, clock: po.Clock,
		limiter: po.Limiter, observer: po.Observer, taintEffect: po.TaintEffect, flapping: po.Flapping,
		legacy: choice == ModelLegacy, fallback: make(chan struct{}, 1),
	}
	p.metrics.SetModel(p.modelName())
	return p
}

// SetSink sets where slices go; until then Sync only builds.
func (p *Publisher) SetSink(sink ResourcePublisher) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sink = sink
	p.published = false
}

// Sync discovers the node and publishes if the inventory, the model or the sink changed
// since the last publish.
func (p *Publisher) Sync(ctx context.Context) error {
	_, err := p.sync(ctx)
	return err
}

// sync is Sync that also says whether it handed slices to the sink.
func (p *Publisher) sync(ctx context.Context) (bool, error) {
	logger := klog.FromContext(ctx)
	inv, err := p.discoverer.Discover(ctx)
	if err != nil {
		p.metrics.PublishError("discover")
		return false, fmt.Errorf("discover node: %w", err)
	}
	var flaps map[devicemodel.PortID]string
	if p.flapping != nil {
		flaps = p.flapping()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	inventoryChanged := p.current == nil || !reflect.DeepEqual(inv, p.inventory)
	rebuild := inventoryChanged || !maps.Equal(flaps, p.flaps)
	previous := p.inventory
	if rebuild {
		current, other, err := p.build(inv, flaps)
		if err != nil {
			p.metrics.PublishError("build")
			return false, err
		}
		p.inventory, p.flaps, p.current, p.other, p.published = inv, flaps, current, other, false
		if inventoryChanged {
			current.LogIssues(logger)
			logger.Info("Node inventory changed", "ports", len(inv.Ports), "devices", len(current.Devices), "model", p.modelName())
		} else {
			logger.Info("Flapping ports changed", "flapping", len(flaps))
		}
	}
	if p.observer != nil {
		p.observer.Observe(ctx, health.Scan{Previous: previous, Inventory: inv, Changed: rebuild,
			Models: []*devicemodel.Result{p.current, p.other}, Flapping: p.flaps})
	}
	if p.published || p.sink == nil {
		return false, nil
	}
	if err := p.sink.PublishResources(ctx, p.current.Resources); err != nil {
		p.metrics.PublishError("publish")
		return false, fmt.Errorf("publish resources: %w", err)
	}
	p.published = true
	p.metrics.Published()
	return true, nil
}

// build returns the model to publish and the other one, the flapping ports tainted.
func (p *Publisher) build(inv *discovery.Inventory, flaps map[devicemodel.PortID]string) (current, other *devicemodel.Result, err error) {
	opts := p.opts
	opts.Flapping = flaps
	opts.Legacy = p.legacy
	current, err = devicemodel.Build(inv, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("build device model: %w", err)
	}
	opts.Legacy = !p.legacy
	other, err = devicemodel.Build(inv, opts)
	if err != nil {
		return nil, nil, fmt.Errorf("build device model: %w", err)
	}
	setTaintEffect(current, p.taintEffect)
	setTaintEffect(other, p.taintEffect)
	return current, other, nil
}

// setTaintEffect gives the not-ACTIVE taints of r the configured effect. The device model
// always builds NoSchedule; NoExecute makes Kubernetes evict the pods of a port that fails.
func setTaintEffect(r *devicemodel.Result, effect resourceapi.DeviceTaintEffect) {
	for _, pool := range r.Resources.Pools {
		for i := range pool.Slices {
			for j := range pool.Slices[i].Devices {
				taints := pool.Slices[i].Devices[j].Taints
				for k := range taints {
					if taints[k].Key == devicemodel.NotActiveTaintKey {
						taints[k].Effect = effect
					}
				}
			}
		}
	}
}

// HandleDroppedFields switches an auto node to the legacy model when the API server
// dropped the fields of the partitionable model. It returns false when there is nothing
// it can do, so that the caller logs the error.
func (p *Publisher) HandleDroppedFields(ctx context.Context, err *resourceslice.DroppedFieldsError) bool {
	features := err.DisabledFeatures()
	// Only the fields of the partitionable model are fixed by the legacy one; dropped
	// taints, for example, are dropped in both.
	needsLegacy := len(features) == 0 || slices.ContainsFunc(features, func(f string) bool {
		return f == "DRAPartitionableDevices" || f == "DRAConsumableCapacity"
	})
	p.mu.Lock()
	if p.choice != ModelAuto || p.legacy || !needsLegacy {
		p.mu.Unlock()
		return false
	}
	p.legacy = true
	p.current, p.other = p.other, p.current
	p.published = false
	p.mu.Unlock()
	p.metrics.SetModel(string(ModelLegacy))
	klog.FromContext(ctx).Info("API server dropped fields of the partitionable device model, publishing the legacy model on this node from now on",
		"disabledFeatures", features, "error", err.Error())
	select {
	case p.fallback <- struct{}{}:
	default:
	}
	return true
}

// Lookup finds a device by pool and name (the kubelet plugin's DeviceLookup): devices of
// the published model first, then those of the other model of the same inventory.
func (p *Publisher) Lookup(pool, device string) (devicemodel.Device, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, r := range []*devicemodel.Result{p.current, p.other} {
		if r == nil {
			continue
		}
		if r.PoolName != pool {
			continue
		}
		if d, ok := r.Devices[device]; ok {
			return d, true
		}
	}
	return devicemodel.Device{}, false
}

// Legacy reports whether the node publishes the legacy model.
func (p *Publisher) Legacy() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.legacy
}

// DeviceCounts counts the published devices by mode and by whether a claim in cp holds
// them, for the devices gauge.
func (p *Publisher) DeviceCounts(cp *checkpoint.Checkpoint) []metrics.DeviceCount {
	held := map[string]bool{}
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			held[d.Device] = true
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current == nil {
		return nil
	}
	counts := map[[2]string]int{}
	for name, d := range p.current.Devices {
		state := "free"
		if held[name] {
			state = "prepared"
		}
		counts[[2]string{string(d.Mode), state}]++
	}
	out := make([]metrics.DeviceCount, 0, len(counts))
	for k, n := range counts {
		out = append(out, metrics.DeviceCount{Mode: k[0], State: k[1], Count: n})
	}
	slices.SortFunc(out, func(a, b metrics.DeviceCount) int {
		if a.Mode != b.Mode {
			return strings.Compare(a.Mode, b.Mode)
		}
		return strings.Compare(a.State, b.State)
	})
	return out
}

func (p *Publisher) modelName() string {
	if p.legacy {
		return string(ModelLegacy)
	}
	return string(ModelPartitionable)
}

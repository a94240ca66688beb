package plugin

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
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

// Trigger says when to look at the node again: it returns a channel that receives when
// a rescan is due. Today that is a ticker (Periodic); an event source can take its place.
type Trigger interface {
	C() <-chan struct{}
}

// Periodic returns a trigger that fires every interval.
func Periodic(ctx context.Context, c clock.WithTicker, interval time.Duration) Trigger {
	t := periodic{ch: make(chan struct{})}
	ticker := c.NewTicker(interval)
	go func() {
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C():
				select {
				case t.ch <- struct{}{}:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return t
}

type periodic struct{ ch chan struct{} }

func (p periodic) C() <-chan struct{} { return p.ch }

// Publisher keeps the node's ResourceSlices in line with its hardware: it discovers,
// builds the device model and publishes, and does it again only when the inventory (or
// the model) changed, so that a quiet node causes no API traffic.
type Publisher struct {
	discoverer Discoverer
	opts       devicemodel.Options
	choice     Model
	metrics    *metrics.Plugin

	// fallback is signalled when the node must switch to the legacy model.
	fallback chan struct{}

	mu        sync.Mutex
	sink      ResourcePublisher
	legacy    bool
	inventory *discovery.Inventory
	published bool
	// current is the model being published; other is the other model of the same
	// inventory, so that claims allocated just before a switch still prepare.
	current, other *devicemodel.Result
}

// NewPublisher returns a publisher. opts.Legacy is ignored: choice decides the model.
func NewPublisher(d Discoverer, opts devicemodel.Options, choice Model, m *metrics.Plugin) *Publisher {
	if m == nil {
		m = metrics.NewPlugin()
	}
	p := &Publisher{discoverer: d, opts: opts, choice: choice, metrics: m, legacy: choice == ModelLegacy, fallback: make(chan struct{}, 1)}
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
	logger := klog.FromContext(ctx)
	inv, err := p.discoverer.Discover(ctx)
	if err != nil {
		p.metrics.PublishError("discover")
		return fmt.Errorf("discover node: %w", err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	rebuild := p.current == nil || !reflect.DeepEqual(inv, p.inventory)
	if rebuild {
		current, other, err := p.build(inv)
		if err != nil {
			p.metrics.PublishError("build")
			return err
		}
		p.inventory, p.current, p.other, p.published = inv, current, other, false
		current.LogIssues(logger)
		logger.Info("Node inventory changed", "ports", len(inv.Ports), "devices", len(current.Devices), "model", p.modelName())
	}
	if p.published || p.sink == nil {
		return nil
	}
	if err := p.sink.PublishResources(ctx, p.current.Resources); err != nil {
		p.metrics.PublishError("publish")
		return fmt.Errorf("publish resources: %w", err)
	}
	p.published = true
	p.metrics.Published()
	return nil
}

// build returns the model to publish and the other one.
func (p *Publisher) build(inv *discovery.Inventory) (current, other *devicemodel.Result, err error) {
	opts := p.opts
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
	return current, other, nil
}

// Run calls Sync whenever trigger fires or the model must change, until ctx ends.
func (p *Publisher) Run(ctx context.Context, trigger Trigger) {
	logger := klog.FromContext(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-trigger.C():
		case <-p.fallback:
		}
		if err := p.Sync(ctx); err != nil {
			logger.Error(err, "Updating ResourceSlices failed, retrying at the next rescan")
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

// Lookup implements DeviceLookup: devices of the published model first, then those of
// the other model of the same inventory.
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

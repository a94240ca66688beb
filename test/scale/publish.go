package scale

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// Model is how the simulated nodes publish their ports.
type Model string

// The device models the harness compares.
const (
	// ModelDefault is the plugin's default: per port an exclusive device and a shared
	// device with consumable shares over shared counters.
	ModelDefault Model = "default"
	// ModelLegacy is the plugin's model for clusters without partitionable devices: per
	// port an exclusive device and single-share devices.
	ModelLegacy Model = "legacy"
	// ModelPerNIC is the plugin's model with the node configuration's modes: exclusive:
	// one device per port and, where every RDMA device has one port, no counters (the
	// shape of a one-device-per-NIC driver such as dranet). Whole ports only.
	ModelPerNIC Model = "per-nic"
	// ModelFewAttributes is the default model's devices and counters with only the
	// attributes the measured pods select on (mode, numa_node and the PCIe root). Not a
	// model of this driver: it measures what the other attributes cost the scheduler.
	ModelFewAttributes Model = "few-attributes"
	// ModelCapacity is the plugin's model with modes: shared: one device per port whose
	// consumable shares alone keep its claims apart, no counters. A share asks for the
	// default capacity (one share), a whole port for every share
	// (docs/benchmarks-schedperf.md).
	ModelCapacity Model = "capacity"
)

// fewAttributes are the attributes ModelFewAttributes keeps, as published (the driver's
// own without their domain).
var fewAttributes = []resourceapi.QualifiedName{ownAttribute(devicemodel.AttrMode), ownAttribute(devicemodel.AttrNUMANode), resourceapi.QualifiedName(pcieRootAttribute)}

// ownAttribute is the name of one of the driver's own attributes as it publishes it:
// without its domain (see the devicemodel package).
func ownAttribute(a resourceapi.QualifiedName) resourceapi.QualifiedName {
	return resourceapi.QualifiedName(strings.TrimPrefix(string(a), devicemodel.AttributeDomain+"/"))
}

// requestCounter counts the HTTP requests of the simulated plugins: n all of them,
// watches included (the idle traffic); work those that are not watches.
type requestCounter struct{ n, work atomic.Int64 }

func (c *requestCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		c.count(r)
		return rt.RoundTrip(r)
	})
}

// count counts one request.
func (c *requestCounter) count(r *http.Request) {
	c.n.Add(1)
	if r.URL.Query().Get("watch") != "true" {
		c.work.Add(1)
	}
}

// waitQuiet waits until no request other than a watch has been counted for quiet, at
// most for timeout. Watches are left out: every informer restarts its watch after 5 to
// 10 minutes (client-go's reflector), so a thousand plugins that have run for that long
// start one every few hundred milliseconds however idle they are, and a wait for total
// silence would never end (1,000 nodes, 2026-11-28).
func (c *requestCounter) waitQuiet(ctx context.Context, quiet, timeout time.Duration) error {
	last, since := c.work.Load(), time.Now()
	err := wait.PollUntilContextTimeout(ctx, quiet/10, timeout, false, func(context.Context) (bool, error) {
		if n := c.work.Load(); n != last {
			last, since = n, time.Now()
		}
		return time.Since(since) >= quiet, nil
	})
	if err != nil {
		return fmt.Errorf("the plugins made requests other than watches for %v without a pause of %v: %w", timeout, quiet, err)
	}
	return nil
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// pluginClient is the client of every simulated plugin: one connection pool, each
// request counted.
func pluginClient(base *rest.Config, c *requestCounter) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(base)
	cfg.Wrap(c.wrap)
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("create the plugins' client: %w", err)
	}
	return client, nil
}

// sliceSink hands one driver's resources of one node to a ResourceSlice controller, as
// the kubelet plugin helper does: the first call starts the controller, later calls
// update it. It remembers what it was last handed, so that the harness can wait for the
// API server to have exactly that.
type sliceSink struct {
	// ctx is the controller's lifetime: the cluster's, not a caller's.
	ctx    context.Context
	client kubernetes.Interface
	driver string
	owner  *resourceslice.Owner
	// syncDelay is the controller's delay after an event of a slice it did not ask for
	// (nil: the library's default, as the plugin runs it).
	syncDelay *time.Duration

	mu   sync.Mutex
	ctrl *resourceslice.Controller
	want []string
}

func newSliceSink(ctx context.Context, client kubernetes.Interface, driver string, node *v1.Node) *sliceSink {
	return &sliceSink{ctx: ctx, client: client, driver: driver, owner: &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
}

// PublishResources implements publish.ResourcePublisher.
func (s *sliceSink) PublishResources(_ context.Context, res resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = resourcesFingerprint(res)
	if s.ctrl != nil {
		s.ctrl.Update(&res)
		return nil
	}
	ctrl, err := resourceslice.StartController(s.ctx, resourceslice.Options{DriverName: s.driver, KubeClient: s.client, Owner: s.owner, Resources: &res, SyncDelay: s.syncDelay})
	if err != nil {
		return fmt.Errorf("start the ResourceSlice controller of %s on %s: %w", s.driver, s.owner.Name, err)
	}
	s.ctrl = ctrl
	return nil
}

// wanted is the fingerprint of what the sink was last handed.
func (s *sliceSink) wanted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.want
}

// Stop stops the controller; the slices stay.
func (s *sliceSink) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctrl != nil {
		s.ctrl.Stop()
		s.ctrl = nil
	}
}

// waitPublished waits until the API server has exactly the slices the sink was last
// handed for its node and driver.
func (s *sliceSink) waitPublished(ctx context.Context, api kubernetes.Interface) error {
	want := s.wanted()
	var got []string
	sel := fields.AndSelectors(fields.OneTermEqualSelector("spec.nodeName", s.owner.Name), fields.OneTermEqualSelector("spec.driver", s.driver)).String()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := api.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return false, nil
		}
		got = slicesFingerprint(list.Items)
		return slices.Equal(got, want), nil
	})
	if err != nil {
		return fmt.Errorf("the slices of %s on %s: the API server has %d devices, %d wanted, not the same (%v): %w", s.driver, s.owner.Name, len(got), len(want), firstDifference(got, want), err)
	}
	return nil
}

// resourcesFingerprint describes the devices of res: a sorted line per device with its
// name and the number of its attributes, counter consumptions and taints. Two sets of
// slices with the same fingerprint hold the same devices in the same model, which is
// what the harness waits for after a change of model (the device count alone does not
// change between the default and the few-attributes model).
func resourcesFingerprint(res resourceslice.DriverResources) []string {
	var out []string
	for _, pool := range res.Pools {
		for _, s := range pool.Slices {
			out = appendFingerprint(out, s.Devices)
		}
	}
	slices.Sort(out)
	return out
}

// slicesFingerprint is resourcesFingerprint of published slices.
func slicesFingerprint(items []resourceapi.ResourceSlice) []string {
	var out []string
	for i := range items {
		out = appendFingerprint(out, items[i].Spec.Devices)
	}
	slices.Sort(out)
	return out
}

func appendFingerprint(out []string, devices []resourceapi.Device) []string {
	for _, d := range devices {
		out = append(out, fmt.Sprintf("%s attributes=%d counters=%d taints=%d", d.Name, len(d.Attributes), len(d.ConsumesCounters), len(d.Taints)))
	}
	return out
}

// firstDifference names the first device line of got or want the other lacks.
func firstDifference(got, want []string) string {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return "missing " + w
		}
	}
	for _, g := range got {
		if !slices.Contains(want, g) {
			return "unexpected " + g
		}
	}
	return "none"
}

// staticDiscoverer serves a node's inventory, with one port's state overridden while it
// flaps.
type staticDiscoverer struct {
	inv *discovery.Inventory

	mu   sync.Mutex
	down bool
}

// Discover implements publish.Discoverer. It returns a copy when the first port is down,
// so that the Publisher sees a change.
func (d *staticDiscoverer) Discover(context.Context) (*discovery.Inventory, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.down {
		return d.inv, nil
	}
	inv := *d.inv
	inv.Ports = append([]discovery.Port(nil), d.inv.Ports...)
	inv.Ports[0].State, inv.Ports[0].PhysState = "DOWN", "Disabled"
	return &inv, nil
}

func (d *staticDiscoverer) setDown(down bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.down = down
}

// nodePublisher publishes one simulated node's ports in a model: the plugin's own
// Publisher for its models, the derived models through the same ResourceSlice
// controller. Between changes of model the harness stops it: the slices stay, and
// thousands of idle controllers (each with its informer and its copy of the node's
// devices) do not weigh on the harness's memory.
type nodePublisher struct {
	node *v1.Node
	kind *kind
	disc *staticDiscoverer
	sink *sliceSink
	// pub is the plugin's Publisher while it runs in one of its models.
	pub *publish.Publisher
}

func newNodePublisher(ctx context.Context, client kubernetes.Interface, node *v1.Node, k *kind) *nodePublisher {
	return &nodePublisher{node: node, kind: k, disc: &staticDiscoverer{inv: k.inv}, sink: newSliceSink(ctx, client, devicemodel.DefaultDriverName, node)}
}

// publish makes the node publish model m.
func (p *nodePublisher) publish(ctx context.Context, m Model) error {
	switch m {
	case ModelDefault, ModelLegacy:
		choice := publish.ModelPartitionable
		if m == ModelLegacy {
			choice = publish.ModelLegacy
		}
		p.pub = publish.New(p.disc, ModelOptions(p.node.Name, false), choice, publish.Options{})
		p.pub.SetSink(p.sink)
		return p.pub.Sync(ctx)
	case ModelPerNIC, ModelFewAttributes, ModelCapacity:
		p.pub = nil
		res, err := p.kind.build(p.node.Name, m)
		if err != nil {
			return err
		}
		return p.sink.PublishResources(ctx, res.Resources)
	}
	return fmt.Errorf("unknown model %q", m)
}

// stop stops the node's ResourceSlice controller and drops its Publisher.
func (p *nodePublisher) stop() {
	p.sink.Stop()
	p.pub = nil
}

// withAttributes derives a model from def whose devices keep only the attributes keep
// (as published); the devices, counters and slices are def's.
func withAttributes(def *devicemodel.Result, keep []resourceapi.QualifiedName) *devicemodel.Result {
	out := &devicemodel.Result{Devices: def.Devices, DriverName: def.DriverName, NodeName: def.NodeName, PoolName: def.PoolName}
	out.Resources.Pools = map[string]resourceslice.Pool{}
	for name, pool := range def.Resources.Pools {
		np := resourceslice.Pool{NodeSelector: pool.NodeSelector, Generation: pool.Generation}
		for _, s := range pool.Slices {
			ns := s
			ns.Devices = make([]resourceapi.Device, len(s.Devices))
			for i, d := range s.Devices {
				d = *d.DeepCopy()
				for a := range d.Attributes {
					if !slices.Contains(keep, a) {
						delete(d.Attributes, a)
					}
				}
				ns.Devices[i] = d
			}
			np.Slices = append(np.Slices, ns)
		}
		out.Resources.Pools[name] = np
	}
	return out
}

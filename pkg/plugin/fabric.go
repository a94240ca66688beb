package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/fabric"
)

// PortChecker says whether a port is ready for traffic; *fabric.Checker implements it.
type PortChecker interface {
	Check(p *discovery.Port, want fabric.Want) error
}

// FabricGateOptions configure a FabricGate.
type FabricGateOptions struct {
	// DriverName and PoolName pick the allocation results the gate answers for: this
	// driver's, in this node's pool.
	DriverName, PoolName string
	// Kube lists and watches the claims; StatusKube writes their status (the status
	// writer's client, with its own rate limit). StatusKube nil uses Kube.
	Kube, StatusKube kubernetes.Interface
	// Devices finds the published devices of the allocation results.
	Devices DeviceLookup
	// Checker reads the ports.
	Checker PortChecker
	// Timeout is how long after its allocation a claim waits for its ports before the
	// gate reports the binding as failed (nodeconfig.FabricReadiness.Timeout).
	Timeout time.Duration
	// RetryInterval is how often the ports of a waiting claim are read again; the
	// health poll interval.
	RetryInterval time.Duration
	// Clock times the retries and the timeout; nil is the real clock.
	Clock clock.WithTicker
}

// FabricGate answers the binding conditions of fabric readiness (KEP-5007) for the
// claims allocated devices of this node's gated ports: between the scheduler's
// allocation and the pod's binding it reads each allocated port and sets, in the claim's
// status.devices entry of the device, FabricReadyCondition True once the port is ready,
// or, when the timeout passes first, FabricFailedCondition True with a message saying
// what was missing; the scheduler then binds the pod, or gives the node up and tries
// again. docs/kubelet-plugin.md (Fabric readiness) describes the watch and its cost.
//
// Invariants:
//   - It writes only its own conditions, in this driver's entries of claims allocated in
//     this node's pool (the chart's admission policy allows no more), and keeps the rest
//     of the entries (prepare's Ready condition and data, network data).
//   - A claim is settled once every gated device's FabricReady is True or one's
//     FabricFailed is True; a settled claim is never written again for that allocation
//     (the scheduler clears status.devices when it deallocates).
//   - Memory: claims carry no field or label the API could select this node's allocations
//     by, so every claim of the cluster passes through the watch; the gate keeps only the
//     claims that wait for this node, trimmed (claimStore), and nothing of the others.
type FabricGate struct {
	opts  FabricGateOptions
	queue workqueue.TypedRateLimitingInterface[string]
	store *claimStore

	mu sync.Mutex
	// firstSeen stands in for the allocation timestamp of claims without one.
	firstSeen map[types.UID]time.Time
	// stopWatch ends the watch when the API server drops binding conditions: no
	// allocation will ever carry them.
	stopWatch context.CancelFunc
	stopped   bool

	// trim makes what the store keeps of a claim (trimClaim); synced is called once the
	// claims are listed. Tests change them.
	trim   func(*resourceapi.ResourceClaim) *resourceapi.ResourceClaim
	synced func()
}

// NewFabricGate returns a gate; Run makes it work.
func NewFabricGate(opts FabricGateOptions) *FabricGate {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.StatusKube == nil {
		opts.StatusKube = opts.Kube
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = time.Second
	}
	g := &FabricGate{
		opts: opts,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "fabric_readiness", Clock: opts.Clock}),
		firstSeen: map[types.UID]time.Time{},
		trim:      trimClaim(opts.DriverName, opts.PoolName),
	}
	return g
}

// fabricWorkers read ports and write conditions at the same time: the claims waiting on
// one node at once are few, and each check is a handful of file reads.
const fabricWorkers = 2

// Run watches the claims and answers them until ctx ends, or until
// BindingConditionsDropped stops the watch.
func (g *FabricGate) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return
	}
	g.stopWatch = stop
	g.mu.Unlock()

	g.store = newClaimStore(g.trim, func(key string) { g.queue.Add(key) }, g.forget)
	claims := g.opts.Kube.ResourceV1().ResourceClaims(metav1.NamespaceAll)
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return claims.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return claims.Watch(ctx, opts)
		},
	}, g.opts.Kube)
	reflector := cache.NewReflectorWithOptions(lw, &resourceapi.ResourceClaim{}, g.store,
		cache.ReflectorOptions{Name: "fabric-readiness", TypeDescription: "*v1.ResourceClaim", Logger: &logger})
	var wg sync.WaitGroup
	wg.Go(func() { reflector.RunWithContext(watchCtx) })
	logger.Info("Watching ResourceClaims for fabric readiness", "pool", g.opts.PoolName, "timeout", g.opts.Timeout)
	select {
	case <-g.store.synced:
		if g.synced != nil {
			g.synced()
		}
		for range fabricWorkers {
			wg.Go(func() {
				for g.processNext(watchCtx) {
				}
			})
		}
	case <-watchCtx.Done():
	}
	<-watchCtx.Done()
	g.queue.ShutDown()
	wg.Wait()
}

// BindingConditionsDropped stops the watch: the API server drops the binding conditions
// of the published devices (DRADeviceBindingConditions off, before 1.36), so no
// allocation carries them, and prepare is what holds pods back (checkFabric).
func (g *FabricGate) BindingConditionsDropped(ctx context.Context) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return
	}
	g.stopped = true
	if g.stopWatch != nil {
		g.stopWatch()
	}
	klog.FromContext(ctx).Info("The API server drops binding conditions: not watching ResourceClaims for fabric readiness; prepare fails while a gated port is not ready instead")
}

func (g *FabricGate) processNext(ctx context.Context) bool {
	key, shutdown := g.queue.Get()
	if shutdown {
		return false
	}
	defer g.queue.Done(key)
	claim := g.store.get(key)
	if claim == nil {
		g.queue.Forget(key)
		return true
	}
	retry, err := g.sync(ctx, claim)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Could not write fabric readiness, retrying", "claim", klog.KObj(claim), "err", err)
			g.queue.AddRateLimited(key)
		}
	case retry > 0:
		g.queue.Forget(key)
		g.queue.AddAfter(key, retry)
	default:
		g.queue.Forget(key)
	}
	return true
}

// verdict is the gate's answer for one allocated device.
type verdict struct {
	// ready, or else why not.
	ready  bool
	reason string
	msg    string
}

// sync answers one claim as the gate keeps it (claimStore): it reads the ports of its gated
// devices, writes the conditions that changed, and returns after how long to look again
// (0: settled, nothing more to do).
func (g *FabricGate) sync(ctx context.Context, claim *resourceapi.ResourceClaim) (time.Duration, error) {
	results := gatedResults(claim)
	if len(results) == 0 || settled(claim) {
		g.forget(claim.UID)
		return 0, nil
	}
	now := g.opts.Clock.Now()
	start := g.allocatedAt(claim, now)
	verdicts := make([]verdict, len(results))
	configs := decodeConfigs(g.opts.DriverName, claim.Status.Allocation.Devices.Config)
	ready := true
	for i, r := range results {
		verdicts[i] = g.judge(r, configs)
		ready = ready && verdicts[i].ready
	}
	failed := !ready && !now.Before(start.Add(g.opts.Timeout))
	if err := g.write(ctx, claim, results, verdicts, failed); err != nil {
		return 0, err
	}
	logger := klog.FromContext(ctx)
	switch {
	case ready:
		logger.V(2).Info("Fabric ready, the pod may bind", "claim", klog.KObj(claim), "waited", now.Sub(start).Round(time.Millisecond))
	case failed:
		logger.Info("Fabric not ready in time, binding failed", "claim", klog.KObj(claim), "timeout", g.opts.Timeout, "reason", firstNotReady(verdicts).msg)
	default:
		return g.opts.RetryInterval, nil
	}
	g.forget(claim.UID)
	return 0, nil
}

// judge reads the ports of one allocated device.
func (g *FabricGate) judge(r resourceapi.DeviceRequestAllocationResult, configs claimConfigs) verdict {
	if r.AdminAccess != nil && *r.AdminAccess {
		// An observer (a monitor) must see a port in any state.
		return verdict{ready: true, reason: "AdminAccess", msg: "admin access does not wait for the fabric"}
	}
	dev, ok := g.opts.Devices.Lookup(r.Pool, r.Device)
	if !ok {
		return verdict{reason: "DeviceNotPublished", msg: fmt.Sprintf("device %q is not published by this node", r.Device)}
	}
	want := wantOf(r, dev, configs)
	for _, p := range dev.AllPorts() {
		if err := g.opts.Checker.Check(&p, want); err != nil {
			reason := fabric.ReasonUnreadable
			if nr, ok := errors.AsType[*fabric.NotReady](err); ok {
				reason = nr.Reason
			}
			return verdict{reason: reason, msg: err.Error()}
		}
	}
	return verdict{ready: true, reason: "PortReady", msg: readyMessage(dev, want)}
}

// wantOf is what the claim's configuration asks of the device's ports: the P_Key of its
// merged network section. A configuration that does not decode asks nothing here; prepare
// reports it.
func wantOf(r resourceapi.DeviceRequestAllocationResult, dev devicemodel.Device, configs claimConfigs) fabric.Want {
	cfg, errs := configs.forResult(r, dev.Mode != devicemodel.ModeExclusive, map[int]bool{})
	if len(errs) > 0 || cfg == nil || cfg.Network == nil || cfg.Network.PKey == nil {
		return fabric.Want{}
	}
	v, err := v1alpha1.ParsePKey(*cfg.Network.PKey)
	if err != nil {
		return fabric.Want{}
	}
	return fabric.Want{PKey: &v}
}

func readyMessage(dev devicemodel.Device, want fabric.Want) string {
	ports := dev.AllPorts()
	msg := fmt.Sprintf("port %s/%d is ready", ports[0].IBDev, ports[0].Port)
	if len(ports) > 1 {
		msg = fmt.Sprintf("all %d ports are ready", len(ports))
	}
	if want.PKey != nil {
		msg += fmt.Sprintf(", with P_Key 0x%04x", *want.PKey)
	}
	return msg
}

func firstNotReady(vs []verdict) verdict {
	for _, v := range vs {
		if !v.ready {
			return v
		}
	}
	return verdict{}
}

// allocatedAt is when the claim's wait began: the allocation's timestamp (the scheduler
// sets it where binding conditions exist), else when the gate first saw the claim.
func (g *FabricGate) allocatedAt(claim *resourceapi.ResourceClaim, now time.Time) time.Time {
	if ts := claim.Status.Allocation.AllocationTimestamp; ts != nil {
		return ts.Time
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if t, ok := g.firstSeen[claim.UID]; ok {
		return t
	}
	g.firstSeen[claim.UID] = now
	return now
}

func (g *FabricGate) forget(uid types.UID) {
	g.mu.Lock()
	delete(g.firstSeen, uid)
	g.mu.Unlock()
}

// gatedResults are the allocation results the gate answers for: those that carry
// FabricReadyCondition as a binding condition. The gate keeps only this
// driver's results of this node's pool (trimClaim).
func gatedResults(claim *resourceapi.ResourceClaim) []resourceapi.DeviceRequestAllocationResult {
	if claim.Status.Allocation == nil {
		return nil
	}
	var out []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		if slices.Contains(r.BindingConditions, devicemodel.FabricReadyCondition) {
			out = append(out, r)
		}
	}
	return out
}

// settled reports whether the claim's gated devices are answered: all ready, or one
// failed.
func settled(claim *resourceapi.ResourceClaim) bool {
	results := gatedResults(claim)
	if len(results) == 0 {
		return true
	}
	all := true
	for _, r := range results {
		ds := deviceStatusOf(claim, r)
		if ds == nil {
			all = false
			continue
		}
		if conditionTrue(ds.Conditions, devicemodel.FabricFailedCondition) {
			return true
		}
		all = all && conditionTrue(ds.Conditions, devicemodel.FabricReadyCondition)
	}
	return all
}

func conditionTrue(conds []metav1.Condition, typ string) bool {
	for _, c := range conds {
		if c.Type == typ {
			return c.Status == metav1.ConditionTrue
		}
	}
	return false
}

// deviceStatusOf is the status entry of an allocated device, matched as the scheduler
// matches it, plus the share ID.
func deviceStatusOf(claim *resourceapi.ResourceClaim, r resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocatedDeviceStatus {
	for i := range claim.Status.Devices {
		ds := &claim.Status.Devices[i]
		if ds.Driver == r.Driver && ds.Pool == r.Pool && ds.Device == r.Device && sameShare(ds.ShareID, r.ShareID) {
			return ds
		}
	}
	return nil
}

func sameShare(a *string, b *types.UID) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	default:
		return *a == string(*b)
	}
}

// trimClaim returns what the gate keeps of a claim: nil for a claim it has nothing to do
// for, else its identity and only the results of this driver in this node's pool that
// carry binding conditions, this driver's opaque configs (the P_Key), the allocation
// timestamp and this driver's status entries of the pool.
func trimClaim(driver, pool string) func(*resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	return func(claim *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		a := claim.Status.Allocation
		if a == nil {
			return nil
		}
		var results []resourceapi.DeviceRequestAllocationResult
		for _, r := range a.Devices.Results {
			if r.Driver == driver && r.Pool == pool && len(r.BindingConditions) > 0 {
				results = append(results, r)
			}
		}
		if len(results) == 0 {
			return nil
		}
		out := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{
			Name: claim.Name, Namespace: claim.Namespace, UID: claim.UID,
			ResourceVersion: claim.ResourceVersion, Generation: claim.Generation,
		}}
		var configs []resourceapi.DeviceAllocationConfiguration
		for _, c := range a.Devices.Config {
			if c.Opaque != nil && c.Opaque.Driver == driver {
				configs = append(configs, c)
			}
		}
		out.Status.Allocation = &resourceapi.AllocationResult{
			Devices:             resourceapi.DeviceAllocationResult{Results: results, Config: configs},
			AllocationTimestamp: a.AllocationTimestamp,
		}
		for _, ds := range claim.Status.Devices {
			if ds.Driver == driver && ds.Pool == pool {
				out.Status.Devices = append(out.Status.Devices, ds)
			}
		}
		return out
	}
}

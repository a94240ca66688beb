package claimstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// Options configure a Writer.
type Options struct {
	// DriverName is the status entries' driver and the field manager of the apply.
	DriverName string
	// Kube is the client the writer applies with. It should have a rate limiter of its
	// own (the kubelet plugin's --status-api-qps), so that status never queues in front of
	// the kubelet's prepares on the helper's client. Nil disables the writer.
	Kube kubernetes.Interface
	// Clock stamps the conditions and measures the lag; nil is the real clock.
	Clock clock.PassiveClock
	// Metrics receives the lag, the pending count and the outcomes; nil creates a
	// private set.
	Metrics *metrics.Plugin
	// Workers write at the same time; 0 is DefaultWorkers.
	Workers int
	// RetryBase and RetryMax bound the exponential backoff of a claim whose write
	// failed; zero is DefaultRetryBase and DefaultRetryMax.
	RetryBase, RetryMax time.Duration
	// KeepConditions are condition types that another writer sets in this driver's
	// entries (the kubelet plugin's fabric gate: FabricReady, FabricFailed). The writer
	// replaces the driver's entries whole, and carries conditions of these types over
	// from the claim as it reads it; conditions of other types are replaced.
	KeepConditions []string
}

// Defaults of Options.
const (
	DefaultWorkers   = 2
	DefaultRetryBase = 100 * time.Millisecond
	DefaultRetryMax  = 30 * time.Second
)

// Writer keeps the desired device status of every prepared claim and writes it to
// the claim's status.devices with a merge patch guarded by UID and resourceVersion
// (apply), so that it neither races with nor overwrites other writers of the status.
//
// Invariants:
//   - Nothing is dropped: every Set or Update is written unless a later one for the same
//     claim replaced it first (then the later one is written), the claim was forgotten
//     (unprepared: its status no longer matters), or the API server answered with an
//     error that retrying cannot fix (forbidden, not found, another claim under the same
//     name, invalid), which is counted and logged.
//   - The pending set is bounded by the number of prepared claims: one entry per claim
//     UID, and a work queue that holds each UID at most once.
//   - Other errors are retried with per-claim exponential backoff, without limit while
//     the claim stays prepared.
//
// Writes happen in the background (Run), never on the prepare path: the kubelet's
// prepare must not wait for a field that no component acts on.
type Writer struct {
	opts    Options
	queue   workqueue.TypedRateLimitingInterface[types.UID]
	metrics *metrics.Plugin

	mu     sync.Mutex
	claims map[types.UID]*claimStatus
	// pending counts the dirty claims.
	pending int
	// idle is closed and replaced when the last dirty claim was written (WaitIdle).
	idle chan struct{}

	forbiddenLogged atomic.Bool
}

// claimStatus is the desired status of one claim.
type claimStatus struct {
	ref     ClaimRef
	devices []DeviceStatus
	// version counts changes; a write completes the claim only if no change came in
	// while it was on the wire.
	version uint64
	// written is the version the API server has (or refused for good); the claim is
	// dirty while written != version.
	written uint64
	// taken is the version a worker last took to write.
	taken uint64
	// dirtySince is when the oldest unwritten change came in: the lag starts there.
	// takenChangedAt is when the first change after taken came in.
	dirtySince, takenChangedAt time.Time
	// readySince is the Ready condition's lastTransitionTime: kept across rewrites.
	readySince metav1.Time
}

func (c *claimStatus) dirty() bool { return c.written != c.version }

// New returns a writer; Run makes it write.
func New(opts Options) *Writer {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Workers <= 0 {
		opts.Workers = DefaultWorkers
	}
	if opts.RetryBase <= 0 {
		opts.RetryBase = DefaultRetryBase
	}
	if opts.RetryMax <= 0 {
		opts.RetryMax = DefaultRetryMax
	}
	m := opts.Metrics
	if m == nil {
		m = metrics.NewPlugin()
	}
	return &Writer{
		opts:    opts,
		metrics: m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[types.UID](opts.RetryBase, opts.RetryMax),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: "claim_status"}),
		claims: map[types.UID]*claimStatus{},
		idle:   make(chan struct{}),
	}
}

// Set replaces the desired status of the claim's devices of this driver with devices
// and schedules the write; the latest call wins. It never blocks on the API server.
func (s *Writer) Set(ref ClaimRef, devices []DeviceStatus) {
	s.Update(ref, func([]DeviceStatus) []DeviceStatus { return devices })
}

// Update changes the desired status of a claim with change, which gets the current
// devices (nil when the claim has none yet, a copy it may modify) and returns the new
// ones, and schedules the write. Change runs under the writer's lock: it must be quick
// and must not call the writer. A caller that adds to what prepare set (say, network
// data after the pod's sandbox exists) uses Update rather than Set.
func (s *Writer) Update(ref ClaimRef, change func([]DeviceStatus) []DeviceStatus) {
	if s == nil || s.opts.Kube == nil {
		return
	}
	now := s.opts.Clock.Now()
	s.mu.Lock()
	c := s.claims[ref.UID]
	if c == nil {
		c = &claimStatus{readySince: metav1.NewTime(now.Truncate(time.Second))}
		s.claims[ref.UID] = c
	}
	var current []DeviceStatus
	if c.devices != nil {
		current = cloneDeviceStatus(c.devices)
	}
	switch {
	case !c.dirty():
		c.dirtySince = now
		s.pending++
		s.metrics.SetClaimStatusPending(s.pending)
	case c.version != c.taken:
		// The unwritten change is replaced before a worker took it.
		s.metrics.ObserveClaimStatus(metrics.StatusCoalesced)
	}
	if c.version == c.taken {
		c.takenChangedAt = now
	}
	c.ref = ref
	c.devices = change(current)
	c.version++
	s.mu.Unlock()
	s.queue.Add(ref.UID)
}

// Forget drops what is known about the claim: it was unprepared, and a status not yet
// written no longer matters. Safe to call for a claim the writer does not know.
func (s *Writer) Forget(uid types.UID) {
	if s == nil {
		return
	}
	s.mu.Lock()
	if c := s.claims[uid]; c != nil {
		delete(s.claims, uid)
		if c.dirty() {
			s.metrics.ObserveClaimStatus(metrics.StatusForgotten)
			s.pending--
			s.metrics.SetClaimStatusPending(s.pending)
			s.signalIdleLocked()
		}
	}
	s.mu.Unlock()
	// The UID may still be queued; the worker finds no claim and moves on.
	s.queue.Forget(uid)
}

// Run writes until ctx ends, with opts.Workers workers.
func (s *Writer) Run(ctx context.Context) {
	if s.opts.Kube == nil {
		<-ctx.Done()
		return
	}
	var wg sync.WaitGroup
	for range s.opts.Workers {
		wg.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	s.queue.ShutDown()
	wg.Wait()
}

// processNext writes the status of one queued claim; false when the queue shut down.
func (s *Writer) processNext(ctx context.Context) bool {
	uid, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(uid)
	s.mu.Lock()
	c := s.claims[uid]
	if c == nil || !c.dirty() {
		s.mu.Unlock()
		s.queue.Forget(uid)
		return true
	}
	ref, devices, version, readySince := c.ref, cloneDeviceStatus(c.devices), c.version, c.readySince
	c.taken = version
	s.mu.Unlock()

	err := s.apply(ctx, ref, devices, readySince)
	final := err == nil || finalStatusError(err)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claims[uid] != c {
		// Forgotten while on the wire (and maybe set anew: then the UID was queued
		// again and is handed out after Done).
		return true
	}
	switch {
	case err == nil:
		if c.version == version {
			s.metrics.ObserveClaimStatusLag(s.opts.Clock.Since(c.dirtySince))
		}
		s.metrics.ObserveClaimStatus(metrics.StatusWritten)
	case final:
		s.metrics.ObserveClaimStatus(metrics.StatusFailed)
		s.logFinal(ctx, ref, err)
	default:
		if ctx.Err() == nil {
			klog.FromContext(ctx).V(2).Info("Could not write claim device status, retrying", "claim", klog.KRef(ref.Namespace, ref.Name), "err", err)
			s.metrics.ObserveClaimStatus(metrics.StatusRetried)
			s.queue.AddRateLimited(uid)
		}
		return true
	}
	s.queue.Forget(uid)
	c.written = version
	if c.version == version {
		s.pending--
		s.metrics.SetClaimStatusPending(s.pending)
		s.signalIdleLocked()
	} else {
		// Changed meanwhile: Update queued the UID again, and the queue hands it out
		// once this Done returns. The lag of that change starts when it came in.
		c.dirtySince = c.takenChangedAt
	}
	return true
}

// finalStatusError reports whether retrying the write cannot help: the claim is gone or
// was replaced (UID precondition), the plugin may not write it, or the API server refuses
// the content (the allocation changed under it). A later Set is written anew.
func finalStatusError(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsConflict(err) ||
		apierrors.IsInvalid(err) || apierrors.IsGone(err)
}

func (s *Writer) logFinal(ctx context.Context, ref ClaimRef, err error) {
	logger := klog.FromContext(ctx)
	switch {
	case apierrors.IsForbidden(err):
		// Logged once: without the permission every claim fails the same way.
		if !s.forbiddenLogged.Swap(true) {
			logger.Error(err, "Not allowed to write ResourceClaim device status; grant resourceclaims/status patch and resourceclaims/driver associated-node:patch (see docs/kubelet-plugin.md). Claims are still prepared.",
				"claim", klog.KRef(ref.Namespace, ref.Name))
		}
	case apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsGone(err):
		logger.V(2).Info("Claim is gone, not writing its device status", "claim", klog.KRef(ref.Namespace, ref.Name), "claimUID", ref.UID, "err", err)
	default:
		logger.Error(err, "Could not write ResourceClaim device status", "claim", klog.KRef(ref.Namespace, ref.Name))
	}
}

// apply writes the claim's status.devices of this driver.
func (s *Writer) apply(ctx context.Context, ref ClaimRef, devices []DeviceStatus, readySince metav1.Time) error {
	ours := make([]resourceapi.AllocatedDeviceStatus, 0, len(devices))
	for _, dev := range devices {
		ds := resourceapi.AllocatedDeviceStatus{
			Driver: s.opts.DriverName, Pool: dev.Pool, Device: dev.Device,
			Conditions: []metav1.Condition{{
				Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Prepared", Message: "CDI spec written",
				ObservedGeneration: ref.Generation, LastTransitionTime: readySince,
			}},
		}
		if dev.ShareID != "" {
			id := dev.ShareID
			ds.ShareID = &id
		}
		if dev.Data != nil {
			raw, err := json.Marshal(dev.Data)
			if err != nil {
				return fmt.Errorf("encode device status data: %w", err)
			}
			ds.Data = &runtime.RawExtension{Raw: raw}
		}
		if n := dev.Network; n != nil {
			ds.NetworkData = &resourceapi.NetworkDeviceData{InterfaceName: n.InterfaceName, IPs: n.IPs, HardwareAddress: n.HardwareAddress}
		}
		ours = append(ours, ds)
	}
	// A merge patch guarded by the UID and resourceVersion, not server-side apply: apply
	// converts the whole claim to unstructured and back, which re-sorts the keys of the
	// allocation's opaque config parameters, and the API server then refuses the write
	// as a change of status.allocation (that needs resourceclaims/binding). The patch
	// carries the other drivers' entries as they are, so nothing of theirs changes.
	claims := s.opts.Kube.ResourceV1().ResourceClaims(ref.Namespace)
	for attempt := 0; ; attempt++ {
		claim, err := claims.Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read claim for its status: %w", err)
		}
		if claim.UID != ref.UID {
			return apierrors.NewNotFound(resourceapi.Resource("resourceclaims"), ref.Name)
		}
		merged := make([]resourceapi.AllocatedDeviceStatus, 0, len(claim.Status.Devices)+len(ours))
		for _, ds := range claim.Status.Devices {
			if ds.Driver != s.opts.DriverName {
				merged = append(merged, ds)
			}
		}
		// Conditions another writer owns (opts.KeepConditions, the fabric gate's) stay:
		// pods that share the claim and are still to be bound wait for them.
		entries := cloneEntries(ours)
		keepConditions(entries, claim.Status.Devices, s.opts.KeepConditions)
		merged = append(merged, entries...)
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": ref.UID, "resourceVersion": claim.ResourceVersion},
			"status":   map[string]any{"devices": merged},
		})
		if err != nil {
			return fmt.Errorf("encode claim status patch: %w", err)
		}
		_, err = claims.Patch(ctx, ref.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: s.opts.DriverName}, "status")
		if IsStaleWrite(err) && attempt < 4 {
			continue // changed since the read: read again (a UID precondition failure is final)
		}
		if err != nil {
			return fmt.Errorf("patch claim status: %w", err)
		}
		break
	}
	klog.FromContext(ctx).V(4).Info("Wrote claim device status", "claim", klog.KRef(ref.Namespace, ref.Name), "devices", len(devices))
	return nil
}

// Pending is the number of claims whose latest status is not written yet.
func (s *Writer) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pending
}

// signalIdleLocked wakes WaitIdle when nothing is pending any more.
func (s *Writer) signalIdleLocked() {
	if s.pending == 0 {
		close(s.idle)
		s.idle = make(chan struct{})
	}
}

// WaitIdle waits until every known claim's latest status is written (or failed for
// good) or ctx ends; tests and benchmarks use it.
func (s *Writer) WaitIdle(ctx context.Context) error {
	for {
		s.mu.Lock()
		n, ch := s.pending, s.idle
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("wait for claim status: %d claims pending: %w", n, ctx.Err())
		}
	}
}

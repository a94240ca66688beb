// Package plugin is the driver's kubelet plugin: it publishes the node's RDMA ports as
// ResourceSlices and prepares and unprepares ResourceClaims by writing CDI specs, keeping
// a checkpoint so that both survive crashes, restarts and rolling updates.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// SpecWriter writes and removes the per-claim CDI specs; *cdi.Writer implements it.
type SpecWriter interface {
	// Write writes the claim's spec atomically and returns the CDI device IDs of each
	// device, in the order of devices.
	Write(ctx context.Context, claimUID string, devices []cdi.ClaimDevice) ([][]string, error)
	// Remove removes the claim's spec; a missing spec is not an error.
	Remove(ctx context.Context, claimUID string) error
	// List returns the UIDs of the claims that have a spec on disk.
	List() ([]string, error)
	// Exists reports whether the claim's spec is on disk, cheaply (one stat).
	Exists(claimUID string) (bool, error)
	// WriteTopology writes the claim's NCCL topology file, which its spec mounts;
	// Remove removes it with the spec.
	WriteTopology(ctx context.Context, claimUID string, xml []byte) error
}

// DeviceLookup finds a device this node publishes (or published before a change of the
// device model) by pool and name; *publish.Publisher implements it.
type DeviceLookup interface {
	Lookup(pool, device string) (devicemodel.Device, bool)
}

// HealthWatcher streams device health to the kubelet; *health.Monitor implements it.
type HealthWatcher interface {
	Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error
}

// Driver implements [kubeletplugin.DRAPlugin].
//
// PrepareResourceClaims and UnprepareResourceClaims may run concurrently (the helper
// does not serialize them, see run.go); claimlock.go describes the locking that keeps
// them, the cleanup loop and a second plugin instance apart.
type Driver struct {
	driverName string
	nodeName   string
	kube       kubernetes.Interface
	store      *checkpoint.Store
	specs      SpecWriter
	devices    DeviceLookup
	health     HealthWatcher
	metrics    *metrics.Plugin
	clock      clock.PassiveClock
	status     *claimstatus.Writer
	hold       *Failpoint
	claims     *claimLocks
	// net attaches claimed networks into pods (pkg/podnet); nil when network attachment
	// is off, and netOffReason then says why.
	net          *podnet.Network
	netOffReason string
	// metadata rewrites the device metadata of claims whose attachments changed, and
	// metadataFiles removes the metadata of claims the kubelet never unprepared.
	metadata      metadataSink
	metadataFiles *MetadataFiles
	// netnsExclusive reports whether the node's RDMA subsystem is in exclusive network
	// namespace mode; nil means shared.
	netnsExclusive func() bool
	// fatal stops the process after an error that retrying cannot fix.
	fatal func(error)
	// onDroppedFields is told about slices the API server accepted only in part; it
	// returns whether it did something about it.
	onDroppedFields func(context.Context, *resourceslice.DroppedFieldsError) bool
	// fabric reads the ports of gated devices before prepare (fabric_prepare.go), and
	// fabricGate answers their binding conditions (fabric.go); nil when no port is gated.
	fabric     PortChecker
	fabricGate *FabricGate
	// topology builds the NCCL topology files of claims that ask for one (topology.go);
	// nil refuses them.
	topology TopologyBuilder

	// step is called after each step of prepare and unprepare with the step's name;
	// tests use it to simulate a crash there. Nil in production.
	step func(name string)

	mu             sync.Mutex
	droppedLogged  map[string]bool
	deviceCounters func(*checkpoint.Checkpoint) []metrics.DeviceCount
	// deviceCounts are the counts the device gauges were last set to; only
	// updateGauges, under the checkpoint's lock, uses them.
	deviceCounts []metrics.DeviceCount
	// committed is told about every committed checkpoint (DriverOptions.Committed).
	committed func(*checkpoint.Checkpoint)

	// cleanupGrace is how long a claim must be gone before Cleanup removes its
	// leftovers; orphanSince remembers when a spec without entry was first seen orphaned.
	cleanupGrace time.Duration
	cleanupMu    sync.Mutex
	orphanSince  map[string]time.Time
}

var _ kubeletplugin.DRAPlugin = &Driver{}

// DriverOptions are the parts a Driver is made of.
type DriverOptions struct {
	// DriverName and NodeName are the driver's and the node's names.
	DriverName, NodeName string
	// Kube is the client for cleanup, and for claim status when StatusKube is nil.
	Kube kubernetes.Interface
	// StatusKube is the client the claim status writer applies with: one with a rate
	// limiter of its own, so that status writes never wait in front of the helper's
	// GET of a claim the kubelet is preparing (pkg/claimstatus).
	StatusKube kubernetes.Interface
	// Store is the checkpoint in the plugin data directory.
	Store *checkpoint.Store
	// Specs writes the CDI specs.
	Specs SpecWriter
	// Devices finds published devices.
	Devices DeviceLookup
	// Health streams device health; nil reports none (ErrHealthNotSupported).
	Health HealthWatcher
	// Metrics receives the plugin's metrics; nil creates a private set.
	Metrics *metrics.Plugin
	// Clock is the clock for timestamps; nil is the real clock.
	Clock clock.PassiveClock
	// Fatal is called for errors that retrying cannot fix; it must stop the process.
	Fatal func(error)
	// OnDroppedFields handles ResourceSlices that were published without some fields.
	OnDroppedFields func(context.Context, *resourceslice.DroppedFieldsError) bool
	// Hold is the test-only prepare failpoint; nil is off.
	Hold *Failpoint
	// DeviceCounts computes the device gauges from the checkpoint; nil skips them.
	DeviceCounts func(*checkpoint.Checkpoint) []metrics.DeviceCount
	// Committed is told about every committed checkpoint, as the gauges are (the port
	// counter metrics take the claims that hold each port from it); it runs under the
	// checkpoint's lock, so it must be quick and keep nothing of cp. Nil is nobody.
	Committed func(*checkpoint.Checkpoint)
	// Network enables network attachment into pods; nil turns it off.
	Network *NetworkOptions
	// NetworkOffReason says why Network is nil, for the errors of claims that ask for it.
	NetworkOffReason string
	// NetnsExclusive reports the node's RDMA netns mode; nil means shared.
	NetnsExclusive func() bool
	// CleanupGrace is how long a claim must be gone before Cleanup removes what it
	// left; zero is DefaultCleanupGrace, negative removes at once (tests).
	CleanupGrace time.Duration
	// MetadataFiles locates the device metadata files of claims, removed with the
	// claims' other leftovers; nil when device metadata is off.
	MetadataFiles *MetadataFiles
	// Fabric reads the ports of gated devices before prepare; nil checks nothing.
	Fabric PortChecker
	// FabricGate answers the binding conditions of gated devices; it is told when the
	// API server drops them. Nil when no port is gated.
	FabricGate *FabricGate
	// Topology builds the NCCL topology file of claims that ask for one; nil refuses
	// such claims with an error.
	Topology TopologyBuilder
}

// NewDriver checks the checkpoint and returns the driver. A checkpoint of a newer plugin
// version is an error: this build would have to drop state that the newer one relies on.
// A corrupted checkpoint is moved aside and the driver starts empty; entries of an
// earlier boot are dropped and their CDI specs removed.
func NewDriver(ctx context.Context, opts DriverOptions) (*Driver, error) {
	d := &Driver{
		driverName:      opts.DriverName,
		nodeName:        opts.NodeName,
		kube:            opts.Kube,
		store:           opts.Store,
		specs:           opts.Specs,
		devices:         opts.Devices,
		health:          opts.Health,
		metrics:         opts.Metrics,
		clock:           opts.Clock,
		hold:            opts.Hold,
		fatal:           opts.Fatal,
		onDroppedFields: opts.OnDroppedFields,
		droppedLogged:   map[string]bool{},
		deviceCounters:  opts.DeviceCounts,
		committed:       opts.Committed,
		cleanupGrace:    opts.CleanupGrace,
		orphanSince:     map[string]time.Time{},
		netOffReason:    opts.NetworkOffReason,
		netnsExclusive:  opts.NetnsExclusive,
		metadataFiles:   opts.MetadataFiles,
		fabric:          opts.Fabric,
		fabricGate:      opts.FabricGate,
		topology:        opts.Topology,
	}
	if d.netnsExclusive == nil {
		d.netnsExclusive = func() bool { return false }
	}
	if d.cleanupGrace == 0 {
		d.cleanupGrace = DefaultCleanupGrace
	}
	if d.metrics == nil {
		d.metrics = metrics.NewPlugin()
	}
	if d.clock == nil {
		d.clock = clock.RealClock{}
	}
	if d.fatal == nil {
		d.fatal = func(error) {}
	}
	statusKube := opts.StatusKube
	if statusKube == nil {
		statusKube = d.kube
	}
	d.status = claimstatus.New(claimstatus.Options{DriverName: d.driverName, Kube: statusKube, Clock: d.clock, Metrics: d.metrics,
		KeepConditions: fabricConditionTypes})
	claims, err := newClaimLocks(filepath.Join(d.store.Dir(), claimLockDir))
	if err != nil {
		return nil, err
	}
	d.claims = claims
	// After the defaults above: the pod network takes the driver's metrics and claim locks.
	if opts.Network != nil {
		d.net = d.newPodNetwork(opts.Network)
	}
	d.store.SetHooks(checkpoint.Hooks{
		Recover:   func(loaded checkpoint.Loaded) error { return d.recoverCheckpoint(ctx, loaded) },
		Committed: d.updateGauges,
	})
	// Loading recovers what it can; saving once at start makes the recovery stick (the
	// new boot ID, the empty state after a quarantine) before the kubelet can call, and
	// shows early when the data directory is not writable.
	if err := d.update(ctx, func(*checkpoint.Checkpoint) (bool, error) { return true, nil }); err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	return d, nil
}

// claimLockDir is the directory of the per-claim lock files inside the data directory.
const claimLockDir = "claims"

// update applies fn to the checkpoint through the store's group commit and returns when
// the change is saved (see checkpoint.Store.Update for what fn must and must not do).
// Errors of the store itself are counted; fn's own errors are the caller's business.
func (d *Driver) update(ctx context.Context, fn checkpoint.Change) error {
	var fnErr error
	err := d.store.Update(func(cp *checkpoint.Checkpoint) (bool, error) {
		changed, err := fn(cp)
		fnErr = err
		return changed, err
	})
	if err != nil && err != fnErr { //nolint:errorlint // identity: was it fn's error?
		op := "load"
		if errors.Is(err, checkpoint.ErrSave) {
			op = "save"
		}
		d.metrics.CheckpointError(op)
		klog.FromContext(ctx).V(2).Info("Checkpoint update failed", "err", err)
	}
	return err
}

// recoverCheckpoint handles what loading the checkpoint recovered from, on the first
// load of a boot (entries of an earlier boot) or whenever the file was found corrupted.
// It runs inside the store's lock, which is fine for these rare events.
func (d *Driver) recoverCheckpoint(ctx context.Context, loaded checkpoint.Loaded) error {
	logger := klog.FromContext(ctx)
	if loaded.QuarantinedTo != "" {
		d.metrics.CheckpointError("quarantine")
		logger.Error(loaded.Corruption, "Checkpoint was corrupted, moved it aside and started empty; CDI specs of unknown claims are still removed on unprepare and by the cleanup",
			"checkpoint", d.store.Path(), "movedTo", loaded.QuarantinedTo)
	}
	for _, stale := range loaded.Stale {
		// The node rebooted: the pods of these claims are gone and /var/run was
		// emptied; remove whatever a non-tmpfs CDI directory still holds.
		if err := d.specs.Remove(ctx, stale.UID); err != nil {
			// Never fatal: failing here would fail every start, since the entry is only
			// dropped when this load's recovery succeeds. The entry is dropped anyway and
			// a spec left behind is an orphan that the cleanup removes.
			logger.Error(err, "Could not remove the CDI spec of a claim prepared before the node rebooted; dropping its entry, the cleanup removes the spec",
				"claim", klog.KRef(stale.Namespace, stale.Name), "claimUID", stale.UID)
			continue
		}
		// The metadata files and attachment marks live in the data directory, which a
		// reboot keeps.
		if err := d.metadataFiles.removeClaim(stale.UID, stale.Namespace, stale.Name); err != nil {
			logger.Error(err, "Could not remove the device metadata of a claim prepared before the node rebooted", "claim", klog.KRef(stale.Namespace, stale.Name), "claimUID", stale.UID)
		}
		if err := d.net.UnmarkClaim(stale.UID); err != nil {
			logger.Error(err, "Could not remove the attachment marks of a claim prepared before the node rebooted", "claim", klog.KRef(stale.Namespace, stale.Name), "claimUID", stale.UID)
		}
		logger.Info("Dropped claim prepared before the node rebooted", "claim", klog.KRef(stale.Namespace, stale.Name), "claimUID", stale.UID)
	}
	return nil
}

// RunStatusWriter writes the claims' device status in the background until ctx ends.
func (d *Driver) RunStatusWriter(ctx context.Context) { d.status.Run(ctx) }

// ClaimStatus is the writer of the claims' status.devices: the network attachment
// reports what a pod got through it (claimstatus.Writer.Update).
func (d *Driver) ClaimStatus() *claimstatus.Writer { return d.status }

func (d *Driver) updateGauges(cp *checkpoint.Checkpoint) {
	d.metrics.SetPreparedClaims(len(cp.Claims))
	if d.deviceCounters != nil {
		// Setting the gauges makes every series anew; most commits (a completed prepare,
		// the steps of an attachment) hold the same devices as the one before.
		if counts := d.deviceCounters(cp); !slices.Equal(counts, d.deviceCounts) {
			d.metrics.SetDevices(counts)
			d.deviceCounts = counts
		}
	}
	if d.committed != nil {
		d.committed(cp)
	}
}

// PrepareResourceClaims implements [kubeletplugin.DRAPlugin].
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	start := d.clock.Now()
	result, err := d.prepare(ctx, claims)
	failed := len(claims)
	if err == nil {
		failed = 0
		for _, r := range result {
			if r.Err != nil {
				failed++
			}
		}
	}
	d.metrics.ObservePrepare(d.clock.Since(start), len(claims)-failed, failed)
	return result, err
}

// UnprepareResourceClaims implements [kubeletplugin.DRAPlugin].
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	start := d.clock.Now()
	result, err := d.unprepare(ctx, claims)
	failed := len(claims)
	if err == nil {
		failed = 0
		for _, e := range result {
			if e != nil {
				failed++
			}
		}
	}
	d.metrics.ObserveUnprepare(d.clock.Since(start), len(claims)-failed, failed)
	return result, err
}

// HandleError implements [kubeletplugin.DRAPlugin]. Slices that lost fields are handed to
// the publisher (which may fall back to the legacy model), other recoverable errors are
// logged, and anything else stops the process so that the DaemonSet restarts it.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	logger := klog.FromContext(ctx)
	var dropped *resourceslice.DroppedFieldsError
	if errors.As(err, &dropped) {
		d.metrics.PublishError("apiserver")
		if slices.Contains(dropped.DisabledFeatures(), "DRADeviceBindingConditions") {
			// No allocation will carry them: prepare holds pods back instead.
			d.fabricGate.BindingConditionsDropped(ctx)
		}
		if d.onDroppedFields != nil && d.onDroppedFields(ctx, dropped) {
			return
		}
		// Logged once per set of missing features: the controller reports it on every
		// sync, and nothing changes until the cluster does.
		key := fmt.Sprint(dropped.DisabledFeatures())
		d.mu.Lock()
		seen := d.droppedLogged[key]
		d.droppedLogged[key] = true
		d.mu.Unlock()
		if !seen {
			logger.Error(err, "API server dropped fields of the published ResourceSlices; enable the named features or choose another device model", "msg", msg)
		}
		return
	}
	if errors.Is(err, kubeletplugin.ErrRecoverable) {
		// The helper reports stale health streams this way too; they are no publish
		// error (the health monitor stops resending when it cannot read the ports).
		if !isStaleHealth(err) {
			d.metrics.PublishError("apiserver")
		}
		logger.Error(err, msg)
		return
	}
	logger.Error(err, "Stopping after an error that retrying cannot fix", "msg", msg)
	d.fatal(fmt.Errorf("%s: %w", msg, err))
}

// isStaleHealth tells the helper's stale-health report from its publishing errors. The
// helper (k8s.io/dynamic-resource-allocation/kubeletplugin, v0.37) gives neither a type
// of its own: a publishing error is its unexported recoverableError around the
// ResourceSlice controller's error, while the stale-health report wraps ErrRecoverable
// itself, directly. That structure is what is tested here, not the message; a typed
// error for the health report is asked upstream (docs/kubelet-plugin.md, "Upstream").
func isStaleHealth(err error) bool {
	return errors.Unwrap(err) == kubeletplugin.ErrRecoverable //nolint:errorlint // the direct wrap is the distinction
}

// WatchHealthStatus implements [kubeletplugin.DRAPlugin]: the health of every device,
// at once, on every change and periodically, until the kubelet goes away (ctx). The
// kubelet may call it again, and more than once at a time; each call streams on its own.
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	if d.health == nil {
		return kubeletplugin.ErrHealthNotSupported
	}
	return d.health.Watch(ctx, reports)
}

// stepDone reports a finished step to the test seam.
func (d *Driver) stepDone(name string) {
	if d.step != nil {
		d.step(name)
	}
}

// now returns the current time, truncated to seconds so that the checkpoint does not
// change when nothing but the clock did.
func (d *Driver) now() time.Time { return d.clock.Now().UTC().Truncate(time.Second) }

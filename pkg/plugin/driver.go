// Package plugin is the driver's kubelet plugin: it publishes the node's RDMA ports as
// ResourceSlices and prepares and unprepares ResourceClaims by writing CDI specs, keeping
// a checkpoint so that both survive crashes, restarts and rolling updates.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
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
}

// DeviceLookup finds a device this node publishes (or published before a change of the
// device model) by pool and name; *Publisher implements it.
type DeviceLookup interface {
	Lookup(pool, device string) (devicemodel.Device, bool)
}

// HealthWatcher streams device health to the kubelet; *health.Monitor implements it.
type HealthWatcher interface {
	Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error
}

// Driver implements [kubeletplugin.DRAPlugin].
//
// The helper serializes PrepareResourceClaims and UnprepareResourceClaims (across
// instances during a rolling update, through a file lock); the checkpoint store adds its
// own lock so that the cleanup loop can run next to them.
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
	status     *statusWriter
	hold       *Failpoint
	// fatal stops the process after an error that retrying cannot fix.
	fatal func(error)
	// onDroppedFields is told about slices the API server accepted only in part; it
	// returns whether it did something about it.
	onDroppedFields func(context.Context, *resourceslice.DroppedFieldsError) bool

	// step is called after each step of prepare and unprepare with the step's name;
	// tests use it to simulate a crash there. Nil in production.
	step func(name string)

	mu             sync.Mutex
	droppedLogged  map[string]bool
	deviceCounters func(*checkpoint.Checkpoint) []metrics.DeviceCount

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
	// Kube is the client for claim status and cleanup.
	Kube kubernetes.Interface
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
	// CleanupGrace is how long a claim must be gone before Cleanup removes what it
	// left; zero is DefaultCleanupGrace, negative removes at once (tests).
	CleanupGrace time.Duration
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
		cleanupGrace:    opts.CleanupGrace,
		orphanSince:     map[string]time.Time{},
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
	d.status = newStatusWriter(d.driverName, d.kube, d.clock)
	err := d.transaction(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) (bool, error) {
		// Loading already recovered what it could; saving makes the recovery stick
		// (the new boot ID, the empty state after a quarantine).
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("open checkpoint: %w", err)
	}
	return d, nil
}

// transaction runs fn on the current checkpoint with the store locked and saves the
// checkpoint when fn says it changed it. Recovery of what Load found (a quarantined
// file, entries of an earlier boot) happens here so that every caller gets it.
func (d *Driver) transaction(ctx context.Context, fn func(context.Context, *checkpoint.Checkpoint) (bool, error)) error {
	logger := klog.FromContext(ctx)
	unlock, err := d.store.Lock()
	if err != nil {
		d.metrics.CheckpointError("load")
		return err
	}
	defer unlock()
	loaded, err := d.store.Load()
	if err != nil {
		d.metrics.CheckpointError("load")
		return err
	}
	cp := loaded.Checkpoint
	recovered := false
	if loaded.QuarantinedTo != "" {
		d.metrics.CheckpointError("quarantine")
		logger.Error(loaded.Corruption, "Checkpoint was corrupted, moved it aside and started empty; CDI specs of unknown claims are still removed on unprepare and by the cleanup",
			"checkpoint", d.store.Path(), "movedTo", loaded.QuarantinedTo)
		recovered = true
	}
	for _, stale := range loaded.Stale {
		// The node rebooted: the pods of these claims are gone and /var/run was
		// emptied; remove whatever a non-tmpfs CDI directory still holds.
		if err := d.specs.Remove(ctx, stale.UID); err != nil {
			return fmt.Errorf("remove CDI spec of claim %s from an earlier boot: %w", stale.UID, err)
		}
		logger.Info("Dropped claim prepared before the node rebooted", "claim", klog.KRef(stale.Namespace, stale.Name), "claimUID", stale.UID)
		recovered = true
	}
	changed, err := fn(ctx, cp)
	if err != nil {
		return err
	}
	if changed || recovered {
		if err := d.store.Save(cp); err != nil {
			d.metrics.CheckpointError("save")
			return fmt.Errorf("save checkpoint: %w", err)
		}
	}
	d.updateGauges(cp)
	return nil
}

// RunStatusWriter writes the claims' device status in the background until ctx ends.
func (d *Driver) RunStatusWriter(ctx context.Context) { d.status.Run(ctx) }

// save writes cp inside a transaction.
func (d *Driver) save(cp *checkpoint.Checkpoint) error {
	if err := d.store.Save(cp); err != nil {
		d.metrics.CheckpointError("save")
		return fmt.Errorf("save checkpoint: %w", err)
	}
	return nil
}

func (d *Driver) updateGauges(cp *checkpoint.Checkpoint) {
	d.metrics.SetPreparedClaims(len(cp.Claims))
	if d.deviceCounters != nil {
		d.metrics.SetDevices(d.deviceCounters(cp))
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
		if !strings.Contains(msg, "health") {
			d.metrics.PublishError("apiserver")
		}
		logger.Error(err, msg)
		return
	}
	logger.Error(err, "Stopping after an error that retrying cannot fix", "msg", msg)
	d.fatal(fmt.Errorf("%s: %w", msg, err))
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

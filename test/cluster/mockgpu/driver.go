package mockgpu

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Driver is the plugin's kubeletplugin.DRAPlugin: it prepares a claim by writing its
// spec (Specs) and unprepares it by removing the spec. It keeps no other state, so a
// restarted plugin unprepares the claims of its predecessor, and the helper's default
// serialization of calls is all the locking it needs.
type Driver struct {
	pool  string
	gpus  map[string]GPU
	specs Specs
	fatal func(error)
}

var _ kubeletplugin.DRAPlugin = (*Driver)(nil)

// NewDriver returns the driver of node's GPUs, writing specs into specDir. fatal is
// called with an error the helper reports that retrying cannot fix; nil ignores them.
func NewDriver(node string, gpus []GPU, specDir string, fatal func(error)) *Driver {
	byName := make(map[string]GPU, len(gpus))
	for _, g := range gpus {
		byName[g.Name] = g
	}
	return &Driver{pool: PoolName(node), gpus: byName, specs: Specs{Dir: specDir}, fatal: fatal}
}

// PrepareResourceClaims implements kubeletplugin.DRAPlugin: one spec per claim, with the
// claim's GPUs of this driver in allocation order. A claim that cannot be prepared gets
// its own error; the others are prepared.
func (d *Driver) PrepareResourceClaims(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	for _, claim := range claims {
		devices, err := d.prepare(claim)
		if err != nil {
			err = fmt.Errorf("prepare claim %s/%s: %w", claim.Namespace, claim.Name, err)
			logger.Error(err, "Prepare failed", "claim", klog.KObj(claim))
		} else {
			logger.V(2).Info("Prepared claim", "claim", klog.KObj(claim), "uid", claim.UID, "devices", len(devices))
		}
		result[claim.UID] = kubeletplugin.PrepareResult{Devices: devices, Err: err}
	}
	return result, nil
}

// prepare writes the claim's spec and returns its devices for the kubelet.
func (d *Driver) prepare(claim *resourceapi.ResourceClaim) ([]kubeletplugin.Device, error) {
	if claim.Status.Allocation == nil {
		return nil, errors.New("not allocated")
	}
	var (
		results []resourceapi.DeviceRequestAllocationResult
		gpus    []GPU
	)
	seen := map[string]bool{}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != DriverName {
			continue
		}
		if r.Pool != d.pool {
			return nil, fmt.Errorf("device %s of request %q is in pool %s, not in this node's pool %s", r.Device, r.Request, r.Pool, d.pool)
		}
		g, ok := d.gpus[r.Device]
		if !ok {
			return nil, fmt.Errorf("device %s of request %q: no such GPU on this node", r.Device, r.Request)
		}
		if seen[r.Device] {
			return nil, fmt.Errorf("device %s is allocated twice", r.Device)
		}
		seen[r.Device] = true
		results = append(results, r)
		gpus = append(gpus, g)
	}
	if len(gpus) == 0 {
		return nil, nil
	}
	ids, err := d.specs.Write(string(claim.UID), gpus)
	if err != nil {
		return nil, err
	}
	devices := make([]kubeletplugin.Device, len(results))
	for i, r := range results {
		devices[i] = kubeletplugin.Device{
			Requests:     []string{r.Request},
			PoolName:     r.Pool,
			DeviceName:   r.Device,
			CDIDeviceIDs: []string{ids[i]},
		}
	}
	return devices, nil
}

// UnprepareResourceClaims implements kubeletplugin.DRAPlugin: it removes each claim's
// spec. A claim that was never prepared here has none, which is not an error.
func (d *Driver) UnprepareResourceClaims(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	logger := klog.FromContext(ctx)
	result := make(map[types.UID]error, len(claims))
	for _, claim := range claims {
		err := d.specs.Remove(string(claim.UID))
		if err != nil {
			err = fmt.Errorf("unprepare claim %s: %w", claim, err)
			logger.Error(err, "Unprepare failed", "claim", claim)
		} else {
			logger.V(2).Info("Unprepared claim", "claim", claim)
		}
		result[claim.UID] = err
	}
	return result, nil
}

// HandleError implements kubeletplugin.DRAPlugin: every error is logged, and one that
// retrying cannot fix stops the plugin (fatal), so that its pod restarts.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	utilruntime.HandleErrorWithContext(ctx, err, msg)
	if !errors.Is(err, kubeletplugin.ErrRecoverable) && d.fatal != nil {
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}

// WatchHealthStatus implements kubeletplugin.DRAPlugin: mock GPUs have no health.
func (d *Driver) WatchHealthStatus(context.Context, chan<- kubeletplugin.DeviceHealthReport) error {
	return kubeletplugin.ErrHealthNotSupported
}

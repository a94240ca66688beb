package plugin

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Steps of prepare and unprepare, reported to Driver.step after each is done.
const (
	stepStartedSaved   = "prepare: started saved"
	stepSpecWritten    = "prepare: spec written"
	stepStatusQueued   = "prepare: status queued"
	stepCompletedSaved = "prepare: completed saved"
	stepSpecRemoved    = "unprepare: spec removed"
	stepEntryRemoved   = "unprepare: entry removed"
)

// claimPlan is what one claim needs on this node: the checkpoint entry to record and the
// CDI devices to write, both in allocation order.
type claimPlan struct {
	claim   *resourceapi.ResourceClaim
	entry   *checkpoint.Claim
	devices []cdi.ClaimDevice
}

// prepare prepares claims in three checkpointed stages: every claim that needs work is
// recorded as PrepareStarted (one save), then its CDI spec and status are written, then
// all are recorded as PrepareCompleted (one save). A crash anywhere leaves either no
// entry and no spec, or a Started entry that the kubelet's retry (or an unprepare) cleans
// up, or a Completed entry whose answer the retry repeats.
func (d *Driver) prepare(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	err := d.transaction(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) (bool, error) {
		var todo []*claimPlan
		for _, claim := range claims {
			plan, answer, err := d.planClaim(ctx, cp, claim)
			switch {
			case err != nil:
				results[claim.UID] = kubeletplugin.PrepareResult{Err: err}
			case answer != nil:
				results[claim.UID] = *answer
			default:
				// Recorded right away so that the next claim of this call sees it when
				// checking for overlaps.
				cp.Claims[plan.entry.UID] = plan.entry
				todo = append(todo, plan)
			}
		}
		if len(todo) == 0 {
			return false, nil
		}
		if err := d.save(cp); err != nil {
			return false, err
		}
		d.stepDone(stepStartedSaved)
		if err := d.hold.Wait(ctx); err != nil {
			return false, err
		}
		for _, plan := range todo {
			results[plan.claim.UID] = d.writeClaim(ctx, cp, plan)
		}
		if err := d.save(cp); err != nil {
			return false, err
		}
		d.stepDone(stepCompletedSaved)
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

// planClaim decides what to do for one claim: an error for the kubelet, the answer of an
// earlier completed preparation, or a plan to carry out. Leftovers of an interrupted
// preparation are removed here, before the new plan is recorded.
func (d *Driver) planClaim(ctx context.Context, cp *checkpoint.Checkpoint, claim *resourceapi.ResourceClaim) (*claimPlan, *kubeletplugin.PrepareResult, error) {
	logger := klog.FromContext(ctx)
	uid := string(claim.UID)
	entry, devices, err := d.planDevices(claim)
	if err != nil {
		return nil, nil, err
	}
	if len(entry.Devices) == 0 {
		// Nothing of this driver's (the kubelet does not normally ask): nothing to write.
		return nil, &kubeletplugin.PrepareResult{}, nil
	}
	existing := cp.Claims[uid]
	if existing != nil && existing.Phase == checkpoint.PhasePrepareCompleted && !existing.Adopted && sameAllocation(existing.Devices, entry.Devices) {
		answer := answerFor(existing)
		return nil, &answer, nil
	}
	if err := checkOverlap(cp, uid, entry.Devices); err != nil {
		return nil, nil, err
	}
	if existing != nil {
		// A Started (or adopted, or since reallocated) entry: whatever an earlier
		// attempt wrote is removed before starting over, so that no stale CDI device
		// survives next to the new ones.
		logger.V(2).Info("Redoing interrupted preparation", "claim", klog.KObj(claim), "phase", existing.Phase, "adopted", existing.Adopted)
		if err := d.specs.Remove(ctx, uid); err != nil {
			return nil, nil, fmt.Errorf("remove CDI spec of an interrupted preparation: %w", err)
		}
		entry.Network = existing.Network
	}
	entry.UpdatedAt = d.now()
	return &claimPlan{claim: claim, entry: entry, devices: devices}, nil, nil
}

// writeClaim writes the CDI spec and the status of one planned claim and marks its entry
// Completed. On failure it rolls the claim back where it can, so that a failed claim
// does not hold devices against others.
func (d *Driver) writeClaim(ctx context.Context, cp *checkpoint.Checkpoint, plan *claimPlan) kubeletplugin.PrepareResult {
	logger := klog.FromContext(ctx)
	uid := plan.entry.UID
	ids, err := d.specs.Write(ctx, uid, plan.devices)
	if err == nil && len(ids) != len(plan.devices) {
		err = fmt.Errorf("CDI writer returned %d device ID lists for %d devices", len(ids), len(plan.devices))
	}
	if err != nil {
		err = fmt.Errorf("write CDI spec: %w", err)
		if rerr := d.specs.Remove(ctx, uid); rerr != nil {
			// The Started entry stays: the retry or unprepare removes the leftovers.
			logger.Error(rerr, "Could not roll back a failed preparation", "claim", klog.KObj(plan.claim))
			return kubeletplugin.PrepareResult{Err: err}
		}
		delete(cp.Claims, uid)
		return kubeletplugin.PrepareResult{Err: err}
	}
	d.stepDone(stepSpecWritten)
	for i := range plan.entry.Devices {
		plan.entry.Devices[i].CDIDeviceIDs = ids[i]
	}
	d.status.enqueue(ctx, plan.claim, plan.entry.Clone().Devices, plan.devices)
	d.stepDone(stepStatusQueued)
	plan.entry.Phase = checkpoint.PhasePrepareCompleted
	plan.entry.UpdatedAt = d.now()
	return answerFor(plan.entry)
}

// planDevices maps the claim's allocation results of this driver to published devices and
// their merged configuration.
func (d *Driver) planDevices(claim *resourceapi.ResourceClaim) (*checkpoint.Claim, []cdi.ClaimDevice, error) {
	if claim.Status.Allocation == nil {
		return nil, nil, errors.New("claim is not allocated")
	}
	alloc := &claim.Status.Allocation.Devices
	configs := decodeConfigs(d.driverName, alloc.Config)
	entry := &checkpoint.Claim{
		UID:       string(claim.UID),
		Namespace: claim.Namespace,
		Name:      claim.Name,
		Phase:     checkpoint.PhasePrepareStarted,
	}
	var devices []cdi.ClaimDevice
	var errs []error
	reported := map[int]bool{}
	for _, r := range alloc.Results {
		if r.Driver != d.driverName {
			continue
		}
		dev, ok := d.devices.Lookup(r.Pool, r.Device)
		if !ok {
			errs = append(errs, fmt.Errorf("request %q: device %q of pool %q is not a device of node %s", r.Request, r.Device, r.Pool, d.nodeName))
			continue
		}
		cfg, cfgErrs := configs.forResult(r, reported)
		if len(cfgErrs) > 0 {
			errs = append(errs, cfgErrs...)
			continue
		}
		shareID := ""
		if r.ShareID != nil {
			shareID = string(*r.ShareID)
		}
		entry.Devices = append(entry.Devices, checkpoint.Device{
			Request:     r.Request,
			Pool:        r.Pool,
			Device:      r.Device,
			ShareID:     shareID,
			PortKey:     dev.PortKey,
			Exclusive:   dev.Mode == devicemodel.ModeExclusive,
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess,
			IBDev:       dev.Port.IBDev,
			Port:        dev.Port.Port,
		})
		devices = append(devices, cdi.ClaimDevice{
			Request: r.Request,
			Device:  r.Device,
			ShareID: shareID,
			Port:    dev.Port,
			Config:  *cfg,
		})
	}
	if len(errs) > 0 {
		return nil, nil, joinErrors(errs)
	}
	return entry, devices, nil
}

// answerFor is the kubelet's answer for a completed entry.
func answerFor(entry *checkpoint.Claim) kubeletplugin.PrepareResult {
	out := kubeletplugin.PrepareResult{Devices: make([]kubeletplugin.Device, 0, len(entry.Devices))}
	for _, dev := range entry.Devices {
		kd := kubeletplugin.Device{
			Requests:     []string{dev.Request},
			PoolName:     dev.Pool,
			DeviceName:   dev.Device,
			CDIDeviceIDs: dev.CDIDeviceIDs,
		}
		if dev.ShareID != "" {
			id := types.UID(dev.ShareID)
			kd.ShareID = &id
		}
		out.Devices = append(out.Devices, kd)
	}
	return out
}

// sameAllocation reports whether a recorded entry was prepared for the allocation that is
// planned now. A claim keeps its UID when it is deallocated and allocated again, and then
// the old answer must not be repeated.
func sameAllocation(recorded, planned []checkpoint.Device) bool {
	if len(recorded) != len(planned) {
		return false
	}
	for i := range recorded {
		a, b := recorded[i], planned[i]
		if a.Request != b.Request || a.Pool != b.Pool || a.Device != b.Device || a.ShareID != b.ShareID {
			return false
		}
	}
	return true
}

// unprepare removes each claim's CDI spec, by UID whether or not the checkpoint knows
// the claim (it may have been lost), and then its entry, with one save for the call.
func (d *Driver) unprepare(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	err := d.transaction(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) (bool, error) {
		changed := false
		for _, claim := range claims {
			uid := string(claim.UID)
			// A later version undoes the claim's network attachment (entry.Network) here,
			// before the spec goes.
			if err := d.specs.Remove(ctx, uid); err != nil {
				results[claim.UID] = fmt.Errorf("remove CDI spec: %w", err)
				continue
			}
			d.stepDone(stepSpecRemoved)
			results[claim.UID] = nil
			if _, ok := cp.Claims[uid]; ok {
				delete(cp.Claims, uid)
				changed = true
			}
		}
		if !changed {
			return false, nil
		}
		if err := d.save(cp); err != nil {
			return false, err
		}
		d.stepDone(stepEntryRemoved)
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return results, nil
}

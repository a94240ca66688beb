package plugin

import (
	"context"
	"errors"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
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
	// redo is set when an entry of an earlier attempt (Started, adopted, or of another
	// allocation) was replaced: whatever that attempt wrote must go first.
	redo bool
	// rollback is set when writing failed and the entry is to be dropped again.
	rollback bool
	// podsAdded is set when a completed entry learnt of new pods (network.go).
	podsAdded bool
}

// prepare prepares claims in three checkpointed stages, holding the claims' locks
// throughout (claimlock.go): every claim that needs work is checked for overlaps and
// recorded as PrepareStarted in one checkpoint change, then its CDI spec and status are
// written without any node-wide lock, then all are recorded as PrepareCompleted in one
// change. A crash anywhere leaves either no entry and no spec, or a Started entry that
// the kubelet's retry (or an unprepare) cleans up, or a Completed entry whose answer the
// retry repeats. Concurrent calls for other claims share the checkpoint saves (group
// commit) and otherwise do not wait for each other.
func (d *Driver) prepare(ctx context.Context, claims []*resourceapi.ResourceClaim) (map[types.UID]kubeletplugin.PrepareResult, error) {
	results := make(map[types.UID]kubeletplugin.PrepareResult, len(claims))
	uids := make([]string, 0, len(claims))
	for _, claim := range claims {
		uids = append(uids, string(claim.UID))
	}
	held, err := d.claims.lock(ctx, uids)
	if err != nil {
		return nil, fmt.Errorf("lock claims: %w", err)
	}
	defer held.release(nil)

	// Planning needs no lock of the node: it reads the claim and the published devices.
	var plans []*claimPlan
	for _, claim := range claims {
		entry, devices, err := d.planDevices(claim)
		switch {
		case err != nil:
			results[claim.UID] = kubeletplugin.PrepareResult{Err: err}
		case len(entry.Devices) == 0:
			// Nothing of this driver's (the kubelet does not normally ask): nothing to write.
			results[claim.UID] = kubeletplugin.PrepareResult{}
		default:
			plans = append(plans, &claimPlan{claim: claim, entry: entry, devices: devices})
		}
	}
	var todo []*claimPlan
	err = d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		// Check and reserve in one step: each claim recorded here is seen by the next
		// one's overlap check, in this call and in every later batch.
		todo = todo[:0]
		for _, plan := range plans {
			if answer, done := d.reserve(ctx, cp, plan); done {
				results[plan.claim.UID] = answer
				continue
			}
			todo = append(todo, plan)
		}
		changed := len(todo) > 0
		for _, plan := range plans {
			changed = changed || plan.podsAdded
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	if len(todo) == 0 {
		return results, nil
	}
	d.stepDone(stepStartedSaved)
	if err := d.hold.Wait(ctx); err != nil {
		return nil, err
	}
	for _, plan := range todo {
		results[plan.claim.UID] = d.writeClaim(ctx, plan)
	}
	err = d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		for _, plan := range todo {
			if plan.rollback {
				delete(cp.Claims, plan.entry.UID)
			} else {
				cp.Claims[plan.entry.UID] = plan.entry.Clone()
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	d.stepDone(stepCompletedSaved)
	return results, nil
}

// reserve decides, inside a checkpoint change, what to do for one planned claim: repeat
// the answer of an earlier completed preparation or refuse an overlap (done), or record
// the plan as PrepareStarted so that no other claim can take its devices.
func (d *Driver) reserve(ctx context.Context, cp *checkpoint.Checkpoint, plan *claimPlan) (kubeletplugin.PrepareResult, bool) {
	uid := plan.entry.UID
	existing := cp.Claims[uid]
	if existing != nil && existing.Phase == checkpoint.PhasePrepareCompleted && !existing.Adopted && sameAllocation(existing.Devices, plan.entry.Devices) {
		if d.specPresent(ctx, plan) {
			// A shared claim gains pods: their attachments need to know them.
			plan.podsAdded = addPods(existing, plan.entry)
			return d.answerFor(existing.Clone()), true
		}
		// The spec is gone (a crash between "spec removed" and "entry removed" of an
		// unprepare, or someone removed it): the answer's CDI IDs would point to nothing
		// and the container would fail in the runtime. Redo it like a Started entry.
	}
	if err := checkOverlap(cp, plan.entry); err != nil {
		return kubeletplugin.PrepareResult{Err: err}, true
	}
	plan.redo = existing != nil
	if existing != nil {
		// A Started (or adopted, or since reallocated) entry: whatever an earlier
		// attempt wrote is removed before the spec is written again (writeClaim), so
		// that no stale CDI device survives next to the new ones.
		klog.FromContext(ctx).V(2).Info("Redoing interrupted preparation", "claim", klog.KObj(plan.claim), "phase", existing.Phase, "adopted", existing.Adopted)
		keepAttachments(existing, plan.entry)
	}
	plan.entry.UpdatedAt = d.now()
	cp.Claims[uid] = plan.entry.Clone()
	return kubeletplugin.PrepareResult{}, false
}

// specPresent reports whether the CDI spec of a completed entry is still on disk, with
// one stat; a failing stat counts as missing, which only costs a rewrite.
func (d *Driver) specPresent(ctx context.Context, plan *claimPlan) bool {
	ok, err := d.specs.Exists(plan.entry.UID)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not check the CDI spec of a prepared claim, writing it again", "claim", klog.KObj(plan.claim))
		return false
	}
	if !ok {
		klog.FromContext(ctx).Info("CDI spec of a prepared claim is missing, writing it again", "claim", klog.KObj(plan.claim))
	}
	return ok
}

// writeClaim writes the CDI spec and the status of one reserved claim and completes its
// plan's entry (saved by the caller). On failure it marks the plan for rollback where it
// can, so that a failed claim does not hold devices against others. It runs with the
// claim's lock held and no other.
func (d *Driver) writeClaim(ctx context.Context, plan *claimPlan) kubeletplugin.PrepareResult {
	logger := klog.FromContext(ctx)
	uid := plan.entry.UID
	if plan.redo {
		if err := d.specs.Remove(ctx, uid); err != nil {
			// The Started entry stays: the retry or unprepare removes the leftovers.
			return kubeletplugin.PrepareResult{Err: fmt.Errorf("remove CDI spec of an interrupted preparation: %w", err)}
		}
	}
	if err := d.checkFabric(plan); err != nil {
		// Nothing is written yet; the kubelet retries until the port is ready.
		plan.rollback = !plan.redo
		return kubeletplugin.PrepareResult{Err: err}
	}
	if err := d.net.ReserveAddresses(ctx, plan.claim, plan.entry); err != nil {
		// Nothing is written yet; an interrupted entry stays for the retry to redo.
		plan.rollback = !plan.redo
		return kubeletplugin.PrepareResult{Err: err}
	}
	if cdi.WantsTopology(plan.devices) {
		if err := d.writeTopology(ctx, plan); err != nil {
			// A failed write may leave the file: Remove takes it with the spec.
			if rerr := d.specs.Remove(ctx, uid); rerr != nil {
				logger.Error(rerr, "Could not roll back a failed preparation", "claim", klog.KObj(plan.claim))
				return kubeletplugin.PrepareResult{Err: err}
			}
			plan.rollback = true
			return kubeletplugin.PrepareResult{Err: err}
		}
	}
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
		plan.rollback = true
		return kubeletplugin.PrepareResult{Err: err}
	}
	d.stepDone(stepSpecWritten)
	for i := range plan.entry.Devices {
		plan.entry.Devices[i].CDIDeviceIDs = ids[i]
	}
	enqueueStatus(d.status, plan.claim, plan.entry.Clone().Devices, plan.devices)
	d.stepDone(stepStatusQueued)
	plan.entry.Phase = checkpoint.PhasePrepareCompleted
	plan.entry.UpdatedAt = d.now()
	return d.answerFor(plan.entry.Clone())
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
	var nets []checkpoint.NetworkDevice
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
		cfg, cfgErrs := configs.forResult(r, dev.Mode != devicemodel.ModeExclusive, reported)
		if len(cfgErrs) > 0 {
			errs = append(errs, cfgErrs...)
			continue
		}
		shareID := ""
		if r.ShareID != nil {
			shareID = string(*r.ShareID)
		}
		shares, err := consumedShares(r, dev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		entry.Devices = append(entry.Devices, checkpoint.Device{
			Shares:      shares,
			MaxShares:   dev.MaxShares,
			Request:     r.Request,
			Pool:        r.Pool,
			Device:      r.Device,
			ShareID:     shareID,
			PortKey:     dev.PortKey,
			Exclusive:   dev.Mode == devicemodel.ModeExclusive,
			AdminAccess: r.AdminAccess != nil && *r.AdminAccess,
			IBDev:       dev.Port.IBDev,
			Port:        dev.Port.Port,
			Ports:       portRefs(dev),
		})
		nd, err := d.planNetwork(r, shareID, dev, cfg, d.netnsExclusive())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if nd != nil {
			nets = append(nets, *nd)
			if nd.Config.Mode != nil && nd.Config.Mode.Attaches() && *cfg.GIDIndex == v1alpha1.GIDIndexAuto {
				// The host's GID index is no use in the pod: the pod's own address
				// has its own entry, whose index the NRI side injects (pkg/podnet).
				cfg = cfg.DeepCopy()
				none := v1alpha1.GIDIndexNone
				cfg.GIDIndex = &none
			}
		}
		devices = append(devices, cdi.ClaimDevice{
			Request:  r.Request,
			Device:   r.Device,
			ShareID:  shareID,
			Port:     dev.Port,
			Ports:    dev.Ports,
			Config:   *cfg,
			Attached: nd != nil,
		})
	}
	if err := checkStaticAddresses(nets); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, nil, joinErrors(errs)
	}
	if len(nets) > 0 {
		n := &checkpoint.Network{Pods: podnet.ReservedPods(claim), Generation: claim.Generation, Devices: nets}
		entry.SetNetwork(n)
	}
	return entry, devices, nil
}

// portRefs are the ports a legacy device holds, for the checkpoint; nil for the device of
// one port.
func portRefs(dev devicemodel.Device) []checkpoint.PortRef {
	if len(dev.Ports) == 0 {
		return nil
	}
	refs := make([]checkpoint.PortRef, 0, len(dev.Ports))
	for _, p := range dev.Ports {
		refs = append(refs, checkpoint.PortRef{IBDev: p.IBDev, Port: p.Port, PortKey: devicemodel.DeviceName(p.IBDev, p.Port)})
	}
	return refs
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
// the claim (it may have been lost), and then its entry, with one checkpoint change for
// the call; it holds the claims' locks throughout. Their lock files stay: creating and
// removing one per cycle cost more than the rest of an unprepare on ext4, and the
// cleanup sweeps those nobody holds.
func (d *Driver) unprepare(ctx context.Context, claims []kubeletplugin.NamespacedObject) (map[types.UID]error, error) {
	results := make(map[types.UID]error, len(claims))
	uids := make([]string, 0, len(claims))
	for _, claim := range claims {
		uids = append(uids, string(claim.UID))
	}
	held, err := d.claims.lock(ctx, uids)
	if err != nil {
		return nil, fmt.Errorf("lock claims: %w", err)
	}
	defer held.release(nil)

	attached, err := d.attachedEntries(ctx, uids)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, claim := range claims {
		uid := string(claim.UID)
		// Whatever the runtime's pod events left attached goes before the spec: the
		// pods are gone, and a moved netdev belongs to the host again.
		if entry := attached[uid]; entry != nil {
			if err := d.net.DetachClaim(ctx, uid, entry); err != nil {
				results[claim.UID] = fmt.Errorf("detach the claim's network: %w", err)
				continue
			}
		}
		if err := d.specs.Remove(ctx, uid); err != nil {
			results[claim.UID] = fmt.Errorf("remove CDI spec: %w", err)
			continue
		}
		d.stepDone(stepSpecRemoved)
		// A status not written yet no longer matters; the writer's pending set stays
		// bounded by the prepared claims.
		d.status.Forget(claim.UID)
		results[claim.UID] = nil
		removed = append(removed, uid)
	}
	if len(removed) == 0 {
		return results, nil
	}
	changed := false
	var gone []*checkpoint.Claim
	err = d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		changed, gone = false, gone[:0]
		for _, uid := range removed {
			if entry, ok := cp.Claims[uid]; ok {
				if entry.Network != nil {
					// Its static addresses are released once the change is saved.
					gone = append(gone, entry)
				}
				delete(cp.Claims, uid)
				changed = true
			}
		}
		return changed, nil
	})
	if err != nil {
		return nil, err
	}
	if changed {
		d.stepDone(stepEntryRemoved)
	}
	for _, entry := range gone {
		d.net.ReleaseAddresses(ctx, entry)
	}
	return results, nil
}

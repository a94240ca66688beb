package plugin

import (
	"context"
	"encoding/json"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Reasons of the fabric conditions beside the checker's (fabric.Reason*).
const (
	// reasonTimedOut is FabricFailed's reason: the ports were not ready in time.
	reasonTimedOut = "FabricNotReadyInTime"
)

// fabricConditionTypes are the condition types the gate owns; the claim status writer
// keeps them when it replaces an entry (claimstatus.Options.KeepConditions).
var fabricConditionTypes = []string{devicemodel.FabricReadyCondition, devicemodel.FabricFailedCondition}

// write sets the fabric conditions of the claim's gated devices to the verdicts (and, when
// failed, FabricFailed on those that are not ready) with a merge patch of the status,
// guarded by UID and resourceVersion, reading the claim anew so that every other entry
// and condition stays as it is. Nothing is written when nothing changes.
func (g *FabricGate) write(ctx context.Context, claim *resourceapi.ResourceClaim, results []resourceapi.DeviceRequestAllocationResult, verdicts []verdict, failed bool) error {
	claims := g.opts.StatusKube.ResourceV1().ResourceClaims(claim.Namespace)
	now := metav1.NewTime(g.opts.Clock.Now().Truncate(0))
	for attempt := 0; ; attempt++ {
		current, err := claims.Get(ctx, claim.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil // gone: nothing to answer
		}
		if err != nil {
			return fmt.Errorf("read claim %s for its fabric readiness: %w", klog.KObj(claim), err)
		}
		if current.UID != claim.UID || !sameResults(current, results) {
			return nil // deleted and created again, or allocated anew: the watch brings it
		}
		devices := make([]resourceapi.AllocatedDeviceStatus, 0, len(current.Status.Devices)+len(results))
		for i := range current.Status.Devices {
			devices = append(devices, *current.Status.Devices[i].DeepCopy())
		}
		for i, r := range results {
			ds := findEntry(devices, r)
			if ds == nil {
				devices = append(devices, newEntry(r))
				ds = &devices[len(devices)-1]
			}
			v := verdicts[i]
			status := metav1.ConditionFalse
			if v.ready {
				status = metav1.ConditionTrue
			}
			apimeta.SetStatusCondition(&ds.Conditions, metav1.Condition{Type: devicemodel.FabricReadyCondition, Status: status,
				Reason: v.reason, Message: v.msg, ObservedGeneration: current.Generation, LastTransitionTime: now})
			if failed && !v.ready {
				apimeta.SetStatusCondition(&ds.Conditions, metav1.Condition{Type: devicemodel.FabricFailedCondition, Status: metav1.ConditionTrue,
					Reason: reasonTimedOut, Message: v.msg, ObservedGeneration: current.Generation, LastTransitionTime: now})
			}
		}
		if equality.Semantic.DeepEqual(devices, current.Status.Devices) {
			return nil
		}
		patch, err := json.Marshal(map[string]any{
			"metadata": map[string]any{"uid": current.UID, "resourceVersion": current.ResourceVersion},
			"status":   map[string]any{"devices": devices},
		})
		if err != nil {
			return fmt.Errorf("encode fabric readiness patch: %w", err)
		}
		_, err = claims.Patch(ctx, claim.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: g.opts.DriverName}, "status")
		if claimstatus.IsStaleWrite(err) && attempt < 4 {
			continue // changed since the read (the scheduler, prepare's status): read again
		}
		if err != nil {
			return fmt.Errorf("write fabric readiness of claim %s: %w", klog.KObj(claim), err)
		}
		return nil
	}
}

// sameResults reports whether current still has the gated results the verdicts are for.
func sameResults(current *resourceapi.ResourceClaim, results []resourceapi.DeviceRequestAllocationResult) bool {
	if current.Status.Allocation == nil {
		return false
	}
	for _, r := range results {
		found := false
		for _, c := range current.Status.Allocation.Devices.Results {
			if c.Request == r.Request && c.Driver == r.Driver && c.Pool == r.Pool && c.Device == r.Device && equalShare(c.ShareID, r.ShareID) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

func equalShare(a, b *types.UID) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

func findEntry(devices []resourceapi.AllocatedDeviceStatus, r resourceapi.DeviceRequestAllocationResult) *resourceapi.AllocatedDeviceStatus {
	for i := range devices {
		ds := &devices[i]
		if ds.Driver == r.Driver && ds.Pool == r.Pool && ds.Device == r.Device && sameShare(ds.ShareID, r.ShareID) {
			return ds
		}
	}
	return nil
}

func newEntry(r resourceapi.DeviceRequestAllocationResult) resourceapi.AllocatedDeviceStatus {
	ds := resourceapi.AllocatedDeviceStatus{Driver: r.Driver, Pool: r.Pool, Device: r.Device}
	if r.ShareID != nil {
		id := string(*r.ShareID)
		ds.ShareID = &id
	}
	return ds
}

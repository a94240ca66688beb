package claimstatus

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// TestKeepConditions checks that a write carries over exactly the kept condition types,
// and only from the entry of the same driver, pool, device and share.
func TestKeepConditions(t *testing.T) {
	cond := func(typ string) metav1.Condition {
		return metav1.Condition{Type: typ, Status: metav1.ConditionTrue, Reason: "R"}
	}
	entry := func(device string, share *string, conds ...metav1.Condition) resourceapi.AllocatedDeviceStatus {
		return resourceapi.AllocatedDeviceStatus{Driver: testDriver, Pool: testPool, Device: device, ShareID: share, Conditions: conds}
	}
	keep := []string{"FabricReady", "FabricFailed"}
	for _, tc := range []struct {
		name      string
		ours, old []resourceapi.AllocatedDeviceStatus
		want      [][]string
	}{
		{name: "kept types carried over, others replaced",
			ours: []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1", nil, cond(ConditionReady))},
			old:  []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1", nil, cond(ConditionReady), cond("FabricReady"), cond("Other"), cond("FabricFailed"))},
			want: [][]string{{ConditionReady, "FabricReady", "FabricFailed"}}},
		{name: "other device",
			ours: []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1", nil, cond(ConditionReady))},
			old:  []resourceapi.AllocatedDeviceStatus{entry("mlx5-1-p1", nil, cond("FabricReady"))},
			want: [][]string{{ConditionReady}}},
		{name: "other share",
			ours: []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1-shared", ptr.To("a"), cond(ConditionReady))},
			old: []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1-shared", ptr.To("b"), cond("FabricReady")),
				entry("mlx5-0-p1-shared", nil, cond("FabricFailed")), entry("mlx5-0-p1-shared", ptr.To("a"), cond("FabricFailed"))},
			want: [][]string{{ConditionReady, "FabricFailed"}}},
		{name: "other driver",
			ours: []resourceapi.AllocatedDeviceStatus{entry("mlx5-0-p1", nil, cond(ConditionReady))},
			old:  []resourceapi.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: testPool, Device: "mlx5-0-p1", Conditions: []metav1.Condition{cond("FabricReady")}}},
			want: [][]string{{ConditionReady}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keepConditions(tc.ours, tc.old, keep)
			var got [][]string
			for _, e := range tc.ours {
				var types []string
				for _, c := range e.Conditions {
					types = append(types, c.Type)
				}
				got = append(got, types)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("condition types (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIsStaleWrite(t *testing.T) {
	gr := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{name: "old resourceVersion", err: apierrors.NewConflict(gr, "c0", fmt.Errorf(optimisticLockMsg+"; please apply your changes to the latest version and try again")), want: true},
		{name: "UID precondition", err: apierrors.NewConflict(gr, "c0", fmt.Errorf("Precondition failed: UID in precondition: a, UID in object meta: b")), want: false},
		{name: "not a conflict", err: apierrors.NewInternalError(errors.New(optimisticLockMsg)), want: false},
		{name: "nil", err: nil, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsStaleWrite(tc.err); got != tc.want {
				t.Errorf("IsStaleWrite(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

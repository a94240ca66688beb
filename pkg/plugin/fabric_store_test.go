package plugin

import (
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// storeClaim is a claim named name allocated one device of pool, gated or not, and
// answered ready or not.
func storeClaim(name, pool string, gated, ready bool) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"}}
	if pool == "" {
		return c
	}
	r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: testDriver, Pool: pool, Device: "mlx5-0-p1"}
	if gated {
		r.BindingConditions = []string{devicemodel.FabricReadyCondition}
		r.BindingFailureConditions = []string{devicemodel.FabricFailedCondition}
	}
	c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{r}}}
	if ready {
		c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: testDriver, Pool: pool, Device: "mlx5-0-p1",
			Conditions: []metav1.Condition{{Type: devicemodel.FabricReadyCondition, Status: metav1.ConditionTrue}}}}
	}
	return c
}

// TestClaimStore: the store keeps the claims waiting for this node only, hands those not
// settled to the queue, and reports the ones it drops.
func TestClaimStore(t *testing.T) {
	type step struct {
		op    string // add, update, delete, replace
		objs  []*resourceapi.ResourceClaim
		tomb  bool // delete a tombstone
		kept  []string
		queue []string
		gone  []string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{name: "a waiting claim is kept and queued", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, false)}, kept: []string{"ns/a"}, queue: []string{"ns/a"}},
		}},
		{name: "others are not kept", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{
				storeClaim("unallocated", "", false, false),
				storeClaim("other-node", "node-2-rdma", true, false),
				storeClaim("not-gated", testPool, false, false),
			}},
		}},
		{name: "a settled claim is kept but not queued", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, true)}, kept: []string{"ns/a"}},
		}},
		{name: "deallocated: dropped", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, false)}, kept: []string{"ns/a"}, queue: []string{"ns/a"}},
			{op: "update", objs: []*resourceapi.ResourceClaim{storeClaim("a", "", false, false)}, gone: []string{"uid-a"}},
		}},
		{name: "deleted, also as a tombstone", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, false), storeClaim("b", testPool, true, false)}, kept: []string{"ns/a", "ns/b"}, queue: []string{"ns/a", "ns/b"}},
			{op: "delete", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, false)}, kept: []string{"ns/b"}, gone: []string{"uid-a"}},
			{op: "delete", tomb: true, objs: []*resourceapi.ResourceClaim{storeClaim("b", testPool, true, false)}, gone: []string{"uid-b"}},
		}},
		{name: "a relist keeps the waiting ones and drops the rest", steps: []step{
			{op: "add", objs: []*resourceapi.ResourceClaim{storeClaim("a", testPool, true, false)}, kept: []string{"ns/a"}, queue: []string{"ns/a"}},
			{op: "replace", objs: []*resourceapi.ResourceClaim{storeClaim("b", testPool, true, false), storeClaim("c", "node-2-rdma", true, false)},
				kept: []string{"ns/b"}, queue: []string{"ns/b"}, gone: []string{"uid-a"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var queued, gone []string
			s := newClaimStore(trimClaim(testDriver, testPool), func(key string) { queued = append(queued, key) }, func(uid types.UID) { gone = append(gone, string(uid)) })
			for i, st := range tt.steps {
				queued, gone = nil, nil
				switch st.op {
				case "add", "update":
					for _, c := range st.objs {
						put := s.Add
						if st.op == "update" {
							put = s.Update
						}
						if err := put(c); err != nil {
							t.Fatal(err)
						}
					}
				case "delete":
					for _, c := range st.objs {
						var obj any = c
						if st.tomb {
							obj = cache.DeletedFinalStateUnknown{Key: c.Namespace + "/" + c.Name, Obj: c}
						}
						if err := s.Delete(obj); err != nil {
							t.Fatal(err)
						}
					}
				case "replace":
					var list []any
					for _, c := range st.objs {
						list = append(list, c)
					}
					if err := s.Replace(list, "2"); err != nil {
						t.Fatal(err)
					}
				}
				var kept []string
				for key := range s.claims {
					kept = append(kept, key)
				}
				for _, l := range [][]string{kept, queued, gone, st.kept, st.queue, st.gone} {
					slices.Sort(l)
				}
				if !slices.Equal(kept, st.kept) || !slices.Equal(queued, st.queue) || !slices.Equal(gone, st.gone) {
					t.Errorf("step %d (%s): kept %v, queued %v, gone %v; want %v, %v, %v", i, st.op, kept, queued, gone, st.kept, st.queue, st.gone)
				}
			}
		})
	}
}

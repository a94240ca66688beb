package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// recordingQueue records which pools are enqueued and how.
type recordingQueue struct {
	workqueue.TypedRateLimitingInterface[string]
	added map[string]time.Duration
}

func (q *recordingQueue) Add(item string)                       { q.added[item] = 0 }
func (q *recordingQueue) AddAfter(item string, d time.Duration) { q.added[item] = d }

// eventHarness is a harness whose three pools (InfiniBand shared and exclusive, RoCE
// shared) and a pool whose class is someone else's are synced, so that the index has
// their selectors, on the slices and claims of usageObjects.
func eventHarness(t *testing.T) *harness {
	t.Helper()
	foreign := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "foreign"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}}}
	h := newHarness(t, append(usageObjects(t), foreign)...)
	ibShared := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	ibShared.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	ibExclusive := newPool("ib-exclusive", v1alpha1.PoolModeExclusive, t0)
	ibExclusive.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	roce := newPool("roce-shared", v1alpha1.PoolModeShared, t0)
	roce.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"ETH"}
	for _, p := range []*v1alpha1.RdmaPool{ibShared, ibExclusive, roce, newPool("foreign", v1alpha1.PoolModeShared, t0)} {
		h.putPool(p)
		if err := h.sync(p.Name); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func TestEventsEnqueueAffectedPools(t *testing.T) {
	ib := []string{"ib-shared", "ib-exclusive"}
	share := func(device string, shares int64) resourceapi.DeviceRequestAllocationResult {
		return resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: devicemodel.DefaultDriverName, Pool: "node-b-rdma", Device: device,
			ConsumedCapacity: map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: *apiresource.NewQuantity(shares, apiresource.DecimalSI)}}
	}
	claim := func(name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}
		if len(results) > 0 {
			c.Status.Allocation = &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: results}}
		}
		return c
	}
	stored := func(h *harness, name string) *resourceapi.ResourceClaim {
		c, err := h.kube.ResourceV1().ResourceClaims("default").Get(h.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	deviceSlice := func(h *harness, node string) *resourceapi.ResourceSlice {
		s, err := h.kube.ResourceV1().ResourceSlices().Get(h.ctx, "00002-rdma.dra.io-"+node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	// withDevices returns a copy of s whose devices f changed.
	withDevices := func(s *resourceapi.ResourceSlice, f func(devices []resourceapi.Device) []resourceapi.Device) *resourceapi.ResourceSlice {
		s = s.DeepCopy()
		s.Spec.Devices = f(s.Spec.Devices)
		return s
	}
	taint := func(names ...string) func([]resourceapi.Device) []resourceapi.Device {
		return func(devices []resourceapi.Device) []resourceapi.Device {
			for i := range devices {
				if sets.New(names...).Has(devices[i].Name) {
					devices[i].Taints = append(devices[i].Taints, resourceapi.DeviceTaint{Key: devicemodel.NotActiveTaintKey, Value: "DOWN", Effect: resourceapi.DeviceTaintEffectNoSchedule})
				}
			}
			return devices
		}
	}
	without := func(names ...string) func([]resourceapi.Device) []resourceapi.Device {
		return func(devices []resourceapi.Device) []resourceapi.Device {
			var out []resourceapi.Device
			for _, d := range devices {
				if !sets.New(names...).Has(d.Name) {
					out = append(out, d)
				}
			}
			return out
		}
	}

	tests := []struct {
		name string
		// event sends one event to the controller's handlers.
		event func(h *harness, claims, slices cache.ResourceEventHandler)
		want  []string
	}{
		{"claim of another driver", func(h *harness, claims, _ cache.ResourceEventHandler) {
			gpu := share("gpu-0", 1)
			gpu.Driver = "gpu.example.com"
			claims.OnAdd(claim("gpu", gpu), false)
		}, nil},
		{"claim without allocation", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnAdd(claim("new"), false)
		}, nil},
		{"labels of an allocated claim", func(h *harness, claims, _ cache.ResourceEventHandler) {
			old := stored(h, "three-shares")
			c := old.DeepCopy()
			c.Labels = map[string]string{"team": "ml"}
			claims.OnUpdate(old, c)
		}, nil},
		{"allocation from a device no slice publishes", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnAdd(claim("gone", share("mlx5-42-p1-shared", 1)), false)
		}, nil},
		{"a share of an InfiniBand port", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnAdd(claim("new", share("mlx5-3-p1-shared", 1)), false)
		}, ib},
		{"a share of a RoCE port", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnAdd(claim("new", share("mlx5-9-p1-shared", 1)), false)
		}, []string{"roce-shared"}},
		{"a whole InfiniBand port", func(h *harness, claims, _ cache.ResourceEventHandler) {
			whole := share("mlx5-3-p1", 0)
			whole.ConsumedCapacity = nil
			claims.OnAdd(claim("new", whole), false)
		}, ib},
		{"more shares for a claim", func(h *harness, claims, _ cache.ResourceEventHandler) {
			old := stored(h, "three-shares")
			c := old.DeepCopy()
			c.Status.Allocation.Devices.Results[0].ConsumedCapacity[devicemodel.SharesCapacity] = *apiresource.NewQuantity(4, apiresource.DecimalSI)
			claims.OnUpdate(old, c)
		}, ib},
		{"a RoCE claim deleted", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnDelete(stored(h, "roce-share"))
		}, []string{"roce-shared"}},
		{"an InfiniBand claim's tombstone", func(h *harness, claims, _ cache.ResourceEventHandler) {
			claims.OnDelete(cache.DeletedFinalStateUnknown{Key: "default/three-shares", Obj: stored(h, "three-shares")})
		}, ib},
		{"another driver's slice", func(h *harness, _, slices cache.ResourceEventHandler) {
			s := deviceSlice(h, "node-a").DeepCopy()
			s.Name, s.Spec.Driver = "gpu", "gpu.example.com"
			slices.OnAdd(s, false)
		}, nil},
		{"a slice republished unchanged", func(h *harness, _, slices cache.ResourceEventHandler) {
			s := deviceSlice(h, "node-a")
			slices.OnUpdate(s, s.DeepCopy())
		}, nil},
		{"a slice of shared counters", func(h *harness, _, slices cache.ResourceEventHandler) {
			old, err := h.kube.ResourceV1().ResourceSlices().Get(h.ctx, "00001-rdma.dra.io-node-b", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := old.DeepCopy()
			s.Labels = map[string]string{"changed": "yes"}
			slices.OnUpdate(old, s)
		}, nil},
		{"an InfiniBand port tainted", func(h *harness, _, slices cache.ResourceEventHandler) {
			old := deviceSlice(h, "node-b")
			slices.OnUpdate(old, withDevices(old, taint("mlx5-5-p1", "mlx5-5-p1-shared")))
		}, ib},
		{"a RoCE port gone", func(h *harness, _, slices cache.ResourceEventHandler) {
			old := deviceSlice(h, "node-b")
			slices.OnUpdate(old, withDevices(old, without("mlx5-9-p1", "mlx5-9-p1-shared")))
		}, []string{"roce-shared"}},
		{"the exclusive device of a port with shares out gone", func(h *harness, _, slices cache.ResourceEventHandler) {
			// Only the exclusive pool selects the device, but the shared pool
			// counts the port's shares as free only while no exclusive allocation holds it.
			old := deviceSlice(h, "node-a")
			slices.OnUpdate(old, withDevices(old, without("mlx5-1-p1")))
		}, ib},
		{"a new generation of a node's slices", func(h *harness, _, slices cache.ResourceEventHandler) {
			old, err := h.kube.ResourceV1().ResourceSlices().Get(h.ctx, "00000-rdma.dra.io-node-b", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s := old.DeepCopy()
			s.Spec.Pool.Generation++
			slices.OnUpdate(old, s)
		}, []string{"ib-shared", "ib-exclusive", "roce-shared"}},
		{"a node's device slice deleted", func(h *harness, _, slices cache.ResourceEventHandler) {
			slices.OnDelete(deviceSlice(h, "node-a"))
		}, []string{"ib-shared", "ib-exclusive", "roce-shared"}},
		{"a new node", func(h *harness, _, slices cache.ResourceEventHandler) {
			for _, s := range profileSlices(t, "mixed-bond", "node-c", false) {
				slices.OnAdd(s, false)
			}
		}, []string{"ib-shared", "ib-exclusive", "roce-shared"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := eventHarness(t)
			q := &recordingQueue{added: map[string]time.Duration{}}
			h.c.queue = q
			claims := handler(func(obj any, deleted bool) { h.c.onClaim(h.ctx, obj, deleted) })
			slices := handler(func(obj any, deleted bool) { h.c.onSlice(h.ctx, obj, deleted) })
			tt.event(h, claims, slices)
			want := map[string]time.Duration{}
			for _, p := range tt.want {
				want[p] = usageDelay
			}
			if diff := cmp.Diff(want, q.added); diff != "" {
				t.Errorf("enqueued pools and delays (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSyncCompilesOnce checks that a sync compiles CEL only when the pool's spec
// changed, and that the cache keeps only the expressions in use.
func TestSyncCompilesOnce(t *testing.T) {
	tests := []struct {
		name        string
		change      func(*v1alpha1.RdmaPool)
		wantCompile bool
	}{
		{"nothing", func(*v1alpha1.RdmaPool) {}, false},
		{"a label", func(p *v1alpha1.RdmaPool) { p.Labels = map[string]string{"team": "ml"} }, false},
		{"the config", func(p *v1alpha1.RdmaPool) {
			p.Spec.Config = rawConfig(t, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"unlimited"}`)
		}, true},
		{"the CEL", func(p *v1alpha1.RdmaPool) { p.Spec.CEL = `device.attributes["rdma.dra.io"].numa_node == 0` }, true},
		{"a selector", func(p *v1alpha1.RdmaPool) { p.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := usageObjects(t)
			h := newHarness(t, objs...)
			h.putPool(newPool("p", v1alpha1.PoolModeShared, t0))
			if err := h.sync("p"); err != nil {
				t.Fatal(err)
			}
			first := h.c.cel.compilations
			if first == 0 {
				t.Fatal("the first sync compiled nothing")
			}
			pool := h.pool("p")
			tt.change(pool)
			h.putPool(pool)
			if err := h.sync("p"); err != nil {
				t.Fatal(err)
			}
			if got := h.c.cel.compilations > first; got != tt.wantCompile {
				t.Errorf("the second sync compiled: %v (%d compilations after %d), want %v", got, h.c.cel.compilations, first, tt.wantCompile)
			}
			// The class now has the pool's current expression: one program is live.
			if n := len(h.c.cel.programs); n != 1 {
				t.Errorf("%d programs cached, want 1", n)
			}
			if h.ready("p").Status != metav1.ConditionTrue {
				t.Errorf("Ready %+v", h.ready("p"))
			}
		})
	}
	t.Run("deleted pool", func(t *testing.T) {
		h := newHarness(t)
		h.putPool(newPool("p", v1alpha1.PoolModeShared, t0))
		if err := h.sync("p"); err != nil {
			t.Fatal(err)
		}
		if err := h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := h.sync("p"); err != nil {
			t.Fatal(err)
		}
		if n, m := len(h.c.cel.programs), len(h.c.cel.pools); n != 0 || m != 0 {
			t.Errorf("%d programs and %d pools cached after the pool was deleted", n, m)
		}
	})
}

// TestSyncStatusFollowsEvents changes slices and claims between syncs: the index the
// events keep counts like one built from scratch.
func TestSyncStatusFollowsEvents(t *testing.T) {
	tests := []struct {
		name       string
		change     func(h *harness)
		wantShares int64 // allocatedShares of ib-shared, 4 before the change
		wantPorts  int32 // ports of ib-shared, 16 before
	}{
		{"claim deleted", func(h *harness) {
			if err := h.kube.ResourceV1().ResourceClaims("default").Delete(h.ctx, "three-shares", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, 1, 16},
		{"node's newest generation has one slice of counters only", func(h *harness) {
			s, err := h.kube.ResourceV1().ResourceSlices().Get(h.ctx, "00000-rdma.dra.io-node-a", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			s.Spec.Pool.Generation++
			if _, err := h.kube.ResourceV1().ResourceSlices().Update(h.ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}, 0, 8},
		{"node's device slice deleted", func(h *harness) {
			if err := h.kube.ResourceV1().ResourceSlices().Delete(h.ctx, "00002-rdma.dra.io-node-b", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}, 4, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, usageObjects(t)...)
			pool := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
			pool.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
			h.putPool(pool)
			if err := h.sync("ib-shared"); err != nil {
				t.Fatal(err)
			}
			if st := h.pool("ib-shared").Status; st.AllocatedShares != 4 || st.Ports != 16 {
				t.Fatalf("before the change: %d allocated shares and %d ports, want 4 and 16", st.AllocatedShares, st.Ports)
			}
			tt.change(h)
			if err := h.sync("ib-shared"); err != nil {
				t.Fatal(err)
			}
			if st := h.pool("ib-shared").Status; st.AllocatedShares != tt.wantShares || st.Ports != tt.wantPorts {
				t.Errorf("%d allocated shares and %d ports, want %d and %d", st.AllocatedShares, st.Ports, tt.wantShares, tt.wantPorts)
			}
		})
	}
}

package controller

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// withOptimisticConcurrency gives the fake clientset's DeviceClasses what the API server
// does and its object tracker does not: a resourceVersion and a UID on create, and a
// Conflict for an update with a stale resourceVersion or a delete whose preconditions do
// not hold. Without it a test cannot tell a write decided on a stale cache from one
// decided on the stored object, and that difference is what keeps the controller off a
// class that stopped being its own since its cache last saw it.
func withOptimisticConcurrency(client *fake.Clientset) {
	tracker := client.Tracker()
	gvr := resourceapi.SchemeGroupVersion.WithResource("deviceclasses")
	var version atomic.Int64
	next := func() string { return fmt.Sprint(version.Add(1)) }
	stored := func(name string) (*resourceapi.DeviceClass, error) {
		obj, err := tracker.Get(gvr, "", name)
		if err != nil {
			return nil, err
		}
		return obj.(*resourceapi.DeviceClass), nil
	}
	conflict := func(name, why string) error {
		return apierrors.NewConflict(gvr.GroupResource(), name, errors.New(why))
	}
	client.PrependReactor("*", "deviceclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// By verb: CreateAction and UpdateAction are the same interface.
		switch a.GetVerb() {
		case "create":
			obj := a.(k8stesting.CreateAction).GetObject().(*resourceapi.DeviceClass).DeepCopy()
			obj.ResourceVersion = next()
			obj.UID = types.UID("uid-" + obj.Name + "-" + obj.ResourceVersion)
			if err := tracker.Create(gvr, obj, "", metav1.CreateOptions{}); err != nil {
				return true, nil, err
			}
			return true, obj, nil
		case "update":
			obj := a.(k8stesting.UpdateAction).GetObject().(*resourceapi.DeviceClass).DeepCopy()
			cur, err := stored(obj.Name)
			if err != nil {
				return true, nil, err
			}
			// An update without a resourceVersion is unconditional, as in the API server.
			if obj.ResourceVersion != "" && obj.ResourceVersion != cur.ResourceVersion {
				return true, nil, conflict(obj.Name, "the object has been modified; please apply your changes to the latest version and try again")
			}
			obj.UID, obj.ResourceVersion = cur.UID, next()
			if err := tracker.Update(gvr, obj, "", metav1.UpdateOptions{}); err != nil {
				return true, nil, err
			}
			return true, obj, nil
		case "delete":
			a := a.(k8stesting.DeleteAction)
			cur, err := stored(a.GetName())
			if err != nil {
				return true, nil, err
			}
			if p := a.GetDeleteOptions().Preconditions; p != nil {
				if p.UID != nil && *p.UID != cur.UID {
					return true, nil, conflict(cur.Name, "precondition failed: UID in precondition does not match the object")
				}
				if p.ResourceVersion != nil && *p.ResourceVersion != cur.ResourceVersion {
					return true, nil, conflict(cur.Name, "precondition failed: ResourceVersion in precondition does not match the object")
				}
			}
			return false, nil, nil // the tracker deletes it
		}
		return false, nil, nil
	})
}

// TestSyncNeverWritesAClassThatIsNotItsOwn: whatever the cache says, the controller
// writes no DeviceClass that is not its own when the write reaches the API server. A
// class becomes foreign when an admin takes it over (removes the managed-by label, to
// keep it after its pool is gone, say), when the garbage collector orphans it (the pool
// deleted with --cascade=orphan) or when someone replaces it, possibly between the moment
// the cache saw it and the write; the write must then fail on the API server's
// optimistic concurrency instead of landing, and the pool reports the conflict once the
// cache catches up.
func TestSyncNeverWritesAClassThatIsNotItsOwn(t *testing.T) {
	takeOver := func(h *harness, name string) {
		h.t.Helper()
		class := h.class(name)
		delete(class.Labels, ManagedByLabel)
		class.Spec.Selectors[0].CEL.Expression = "true"
		if _, err := h.kube.ResourceV1().DeviceClasses().Update(h.ctx, class, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	// What the garbage collector does to the class of a pool deleted with
	// --cascade=orphan, before the pool is gone.
	orphan := func(h *harness, name string) {
		h.t.Helper()
		class := h.class(name)
		class.OwnerReferences = nil
		if _, err := h.kube.ResourceV1().DeviceClasses().Update(h.ctx, class, metav1.UpdateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	replace := func(h *harness, name string) {
		h.t.Helper()
		if err := h.kube.ResourceV1().DeviceClasses().Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
		foreign := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}}}
		if _, err := h.kube.ResourceV1().DeviceClasses().Create(h.ctx, foreign, metav1.CreateOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}
	changeSpec := func(h *harness, name string) {
		h.t.Helper()
		pool := h.pool(name)
		pool.Generation++
		pool.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
		h.putPool(pool)
	}
	deletePool := func(h *harness, name string) {
		h.t.Helper()
		if err := h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
			h.t.Fatal(err)
		}
	}

	tests := []struct {
		name string
		// pool changes the pool so that the sync wants to write the class (seen by the
		// cache); class makes the class foreign behind the cache's back.
		pool, class func(*harness, string)
		// poolGone: the pool was deleted, so there is no status to report in.
		poolGone bool
	}{
		{"taken over, then the pool changes", changeSpec, takeOver, false},
		{"taken over, then the pool is deleted", deletePool, takeOver, true},
		{"orphaned, then the pool is deleted", deletePool, orphan, true},
		{"replaced, then the pool changes", changeSpec, replace, false},
		{"replaced, then the pool is deleted", deletePool, replace, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const name = "rdma-exclusive"
			h := newHarness(t)
			h.putPool(newPool(name, v1alpha1.PoolModeExclusive, t0))
			if err := h.sync(name); err != nil {
				t.Fatal(err)
			}
			if !owns(h.class(name), name) {
				t.Fatalf("the controller did not create its class: %+v", h.class(name))
			}
			tt.pool(h, name)
			h.refresh()
			tt.class(h, name)
			foreign := h.class(name)

			// The sync sees the class as its own in the cache; the API server knows better.
			_ = h.c.sync(h.ctx, name)
			if got := h.class(name); got == nil {
				t.Fatalf("the foreign class %s was deleted", name)
			} else if got.ResourceVersion != foreign.ResourceVersion {
				t.Fatalf("the foreign class %s was written: %+v", name, got)
			}
			if tt.poolGone {
				return
			}
			// Once the cache has the foreign class, the pool says so and the class stays.
			if err := h.sync(name); err != nil {
				t.Fatal(err)
			}
			if c := h.ready(name); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonDeviceClassConflict {
				t.Errorf("Ready %+v, want False/%s", c, v1alpha1.ReasonDeviceClassConflict)
			}
			if st := h.pool(name).Status; st.DeviceClassName != "" {
				t.Errorf("deviceClassName %q: the foreign class is not the pool's", st.DeviceClassName)
			}
			if got := h.class(name); got.ResourceVersion != foreign.ResourceVersion {
				t.Errorf("the foreign class %s was written: %+v", name, got)
			}
		})
	}
}

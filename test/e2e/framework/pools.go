package framework

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
)

// pools is the RdmaPool resource through the dynamic client (the driver has no clientset).
func (e *Env) pools() (dynamic.NamespaceableResourceInterface, error) {
	client, err := dynamic.NewForConfig(e.REST)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	return client.Resource(controller.PoolResource), nil
}

// GetPool reads an RdmaPool.
func (e *Env) GetPool(ctx context.Context, name string) (*v1alpha1.RdmaPool, error) {
	client, err := e.pools()
	if err != nil {
		return nil, err
	}
	u, err := client.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pool := &v1alpha1.RdmaPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pool); err != nil {
		return nil, fmt.Errorf("convert RdmaPool %s: %w", name, err)
	}
	return pool, nil
}

// CreatePool creates an RdmaPool; when the test ends it is deleted and its DeviceClass
// waited out, so that the next test sees only the chart's pools.
func (e *Env) CreatePool(t *testing.T, pool *v1alpha1.RdmaPool) {
	t.Helper()
	client, err := e.pools()
	if err != nil {
		t.Fatal(err)
	}
	pool.APIVersion, pool.Kind = v1alpha1.SchemeGroupVersion.String(), v1alpha1.RdmaPoolKind
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		t.Fatalf("convert RdmaPool %s: %v", pool.Name, err)
	}
	if _, err := client.Create(Context(t, 30*time.Second), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create RdmaPool %s: %v", pool.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.DeletePool(ctx, pool.Name); err != nil {
			t.Errorf("delete RdmaPool %s: %v", pool.Name, err)
		}
	})
}

// DeletePool deletes an RdmaPool (missing is fine) and waits until the pool and the
// DeviceClass of its name are gone.
func (e *Env) DeletePool(ctx context.Context, name string) error {
	client, err := e.pools()
	if err != nil {
		return err
	}
	if err := client.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return Poll(ctx, time.Minute, 500*time.Millisecond, func(ctx context.Context) error {
		if _, err := client.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("RdmaPool %s still there (%v)", name, err)
		}
		if _, err := e.Client.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("DeviceClass %s still there (%v)", name, err)
		}
		return nil
	})
}

// PoolCounts is the part of a pool's status that counts ports and shares.
type PoolCounts struct {
	Ports, AllocatedPorts   int32
	Shares, AllocatedShares int64
	Allocated, Free         int64
}

// Counts returns the counts of a pool status.
func Counts(s v1alpha1.RdmaPoolStatus) PoolCounts {
	return PoolCounts{Ports: s.Ports, AllocatedPorts: s.AllocatedPorts, Shares: s.Shares,
		AllocatedShares: s.AllocatedShares, Allocated: s.Allocated, Free: s.Free}
}

// WaitPoolStatus waits until the pool's status is of its current generation, Ready, names
// its DeviceClass and has the counts want, then returns the pool.
func (e *Env) WaitPoolStatus(t *testing.T, name string, want PoolCounts) *v1alpha1.RdmaPool {
	t.Helper()
	ctx := Context(t, time.Minute)
	var pool *v1alpha1.RdmaPool
	Eventually(t, ctx, 45*time.Second, 500*time.Millisecond, "status of RdmaPool "+name, func(ctx context.Context) error {
		var err error
		if pool, err = e.GetPool(ctx, name); err != nil {
			return err
		}
		s := pool.Status
		ready := meta.FindStatusCondition(s.Conditions, v1alpha1.ConditionReady)
		switch {
		case s.ObservedGeneration != pool.Generation:
			return fmt.Errorf("status of generation %d, pool at %d", s.ObservedGeneration, pool.Generation)
		case ready == nil || ready.Status != metav1.ConditionTrue:
			return fmt.Errorf("not Ready: %+v", ready)
		case s.DeviceClassName != name:
			return fmt.Errorf("deviceClassName %q, want %q", s.DeviceClassName, name)
		case Counts(s) != want:
			return fmt.Errorf("counts %+v, want %+v", Counts(s), want)
		}
		return nil
	})
	return pool
}

// PoolClass checks that the DeviceClass of a pool is the controller's (label and
// controller owner reference to the pool's UID) and selects with the CEL that
// controller.ClassCEL generates for the pool (its spec, and for a legacy pool its name),
// and returns it.
func (e *Env) PoolClass(ctx context.Context, pool *v1alpha1.RdmaPool) (*resourceapi.DeviceClass, error) {
	dc, err := e.Client.ResourceV1().DeviceClasses().Get(ctx, pool.Name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	if got := dc.Labels[controller.ManagedByLabel]; got != controller.ManagedByValue {
		return nil, fmt.Errorf("DeviceClass %s: label %s=%q, want %q", dc.Name, controller.ManagedByLabel, got, controller.ManagedByValue)
	}
	owner := metav1.GetControllerOf(dc)
	if owner == nil || owner.Kind != v1alpha1.RdmaPoolKind || owner.Name != pool.Name || owner.UID != pool.UID {
		return nil, fmt.Errorf("DeviceClass %s: controller owner %+v, want RdmaPool %s uid %s", dc.Name, owner, pool.Name, pool.UID)
	}
	want, err := controller.ClassCEL(DriverName, pool)
	if err != nil {
		return nil, fmt.Errorf("CEL of pool %s: %w", pool.Name, err)
	}
	if len(dc.Spec.Selectors) != 1 || dc.Spec.Selectors[0].CEL == nil {
		return nil, fmt.Errorf("DeviceClass %s: selectors %+v, want one CEL selector", dc.Name, dc.Spec.Selectors)
	}
	if got := dc.Spec.Selectors[0].CEL.Expression; got != want {
		return nil, fmt.Errorf("DeviceClass %s: CEL\n%s\nwant\n%s", dc.Name, got, want)
	}
	if !equalPtr(dc.Spec.ExtendedResourceName, pool.Spec.ExtendedResourceName) {
		return nil, errors.New("DeviceClass " + dc.Name + ": extendedResourceName differs from the pool's")
	}
	return dc, nil
}

func equalPtr[T comparable](a, b *T) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// CreateConfigPool creates an RdmaPool of mode over every port whose config is the
// RdmaConfig fields in config (JSON without apiVersion and kind: an admin's grant such
// as allowedNetwork), and waits until its DeviceClass exists; it is deleted when the test
// ends. The chart's default pools grant no network attachment (docs/security.md), so
// the attachment tests allocate through pools like this one.
func (e *Env) CreateConfigPool(t *testing.T, name string, mode v1alpha1.PoolMode, config string) {
	t.Helper()
	raw := `{"apiVersion":"` + v1alpha1.SchemeGroupVersion.String() + `","kind":"` + v1alpha1.RdmaConfigKind + `"`
	if config != "" && config != "{}" {
		raw += "," + config[1:]
	} else {
		raw += "}"
	}
	if _, err := v1alpha1.DecodeConfig([]byte(raw)); err != nil {
		t.Fatalf("pool %s: config %s: %v", name, raw, err)
	}
	e.CreatePool(t, &v1alpha1.RdmaPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       v1alpha1.RdmaPoolSpec{Mode: mode, Config: &runtime.RawExtension{Raw: []byte(raw)}},
	})
	Eventually(t, Context(t, time.Minute), 45*time.Second, 500*time.Millisecond, "DeviceClass "+name, func(ctx context.Context) error {
		_, err := e.Client.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
		return err
	})
}

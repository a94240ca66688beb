package controller

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// PoolResource is the API resource of RdmaPools.
var PoolResource = schema.GroupVersionResource{Group: v1alpha1.GroupName, Version: v1alpha1.Version, Resource: v1alpha1.RdmaPoolResource}

// poolClient reads and writes RdmaPools as typed objects through the dynamic client:
// no generated clientset for one resource, and the fake dynamic client tests it.
type poolClient struct {
	client dynamic.NamespaceableResourceInterface
}

func newPoolClient(client dynamic.Interface) *poolClient {
	return &poolClient{client: client.Resource(PoolResource)}
}

// fromUnstructured converts a pool read from the API.
func fromUnstructured(u *unstructured.Unstructured) (*v1alpha1.RdmaPool, error) {
	pool := &v1alpha1.RdmaPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, pool); err != nil {
		return nil, fmt.Errorf("convert RdmaPool %s: %w", u.GetName(), err)
	}
	return pool, nil
}

// UpdateStatus writes the status of pool (the status subresource) and returns the
// stored pool.
func (c *poolClient) UpdateStatus(ctx context.Context, pool *v1alpha1.RdmaPool) (*v1alpha1.RdmaPool, error) {
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pool)
	if err != nil {
		return nil, fmt.Errorf("convert RdmaPool %s: %w", pool.Name, err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1alpha1.SchemeGroupVersion.String())
	u.SetKind(v1alpha1.RdmaPoolKind)
	out, err := c.client.UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return fromUnstructured(out)
}

// listWatch lists and watches pools as *v1alpha1.RdmaPool, so that the informer's
// cache holds typed objects.
func (c *poolClient) listWatch() *cache.ListWatch {
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list, err := c.client.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			out := &v1alpha1.RdmaPoolList{ListMeta: metav1.ListMeta{ResourceVersion: list.GetResourceVersion(), Continue: list.GetContinue()}}
			for i := range list.Items {
				pool, err := fromUnstructured(&list.Items[i])
				if err != nil {
					return nil, err
				}
				out.Items = append(out.Items, *pool)
			}
			return out, nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := c.client.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if u, ok := e.Object.(*unstructured.Unstructured); ok {
					pool, err := fromUnstructured(u)
					if err != nil {
						// A pool the types cannot read (a newer schema): the reflector
						// would choke on it, so it is dropped; the status stays stale.
						return e, false
					}
					e.Object = pool
				}
				return e, true
			}), nil
		},
	}
}

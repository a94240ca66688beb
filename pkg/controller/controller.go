// Package controller is the driver's cluster-wide controller: it keeps one DeviceClass
// per RdmaPool whose CEL selects exactly the pool's ports in the pool's mode, and
// reports in each pool's status how many ports and shares exist and are in use.
package controller

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// usageDelay batches status updates: slices and claims change in bursts (a node
// republishing, a job of many pods starting), and one recount per burst is enough.
const usageDelay = time.Second

// Controller reconciles RdmaPools into DeviceClasses and pool status.
type Controller struct {
	driverName string
	kube       kubernetes.Interface
	poolClient *poolClient
	metrics    *Metrics

	pools   *poolLister
	classes resourcelisters.DeviceClassLister
	slices  resourcelisters.ResourceSliceLister
	claims  resourcelisters.ResourceClaimLister

	informers []cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[string]
}

// New wires a controller to the API: informers on RdmaPools, this controller's
// DeviceClasses, the driver's ResourceSlices and all ResourceClaims.
func New(driverName string, kube kubernetes.Interface, dyn dynamic.Interface, metrics *Metrics) *Controller {
	c := &Controller{
		driverName: driverName,
		kube:       kube,
		poolClient: newPoolClient(dyn),
		metrics:    metrics,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "rdmapools"}),
	}
	poolInformer := cache.NewSharedIndexInformer(c.poolClient.listWatch(), &v1alpha1.RdmaPool{}, 0, cache.Indexers{})
	c.pools = &poolLister{indexer: poolInformer.GetIndexer()}

	factory := informers.NewSharedInformerFactory(kube, 0)
	classInformer := factory.Resource().V1().DeviceClasses()
	sliceInformer := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = resourceapi.ResourceSliceSelectorDriver + "=" + driverName
	})).Resource().V1().ResourceSlices()
	claimInformer := factory.Resource().V1().ResourceClaims()
	c.classes, c.slices, c.claims = classInformer.Lister(), sliceInformer.Lister(), claimInformer.Lister()

	// Pools are few: any change of one may change another's extended resource name
	// conflict, so every pool is looked at again.
	onPool := handler(func(any) { c.enqueueAll(0) })
	onClass := handler(func(obj any) {
		if class, ok := obj.(*resourceapi.DeviceClass); ok {
			c.queue.Add(class.Name)
			if class.Spec.ExtendedResourceName != nil {
				c.enqueueAll(0)
			}
		}
	})
	onUsage := handler(func(any) { c.enqueueAll(usageDelay) })
	for _, reg := range []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandler
	}{
		{poolInformer, onPool},
		{classInformer.Informer(), onClass},
		{sliceInformer.Informer(), onUsage},
		{claimInformer.Informer(), onUsage},
	} {
		_, _ = reg.inf.AddEventHandler(reg.h)
		c.informers = append(c.informers, reg.inf)
	}
	return c
}

// handler calls f for every add, update and delete, with tombstones unwrapped.
func handler(f func(obj any)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    f,
		UpdateFunc: func(_, obj any) { f(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			f(obj)
		},
	}
}

func (c *Controller) enqueueAll(after time.Duration) {
	for _, name := range c.pools.names() {
		c.queue.AddAfter(name, after)
	}
}

// Run starts the informers, waits for their caches and processes the queue with
// workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	for _, inf := range c.informers {
		go inf.RunWithContext(ctx)
	}
	synced := make([]cache.InformerSynced, len(c.informers))
	for i, inf := range c.informers {
		synced[i] = inf.HasSynced
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("wait for caches: %w", ctx.Err())
	}
	logger.Info("Caches synced, reconciling pools", "workers", workers)
	// A class whose pool is gone while the controller was down: look at it once.
	classes, _ := c.classes.List(labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue}))
	for _, class := range classes {
		c.queue.Add(class.Name)
	}
	for range workers {
		go wait.UntilWithContext(ctx, c.worker, time.Second)
	}
	<-ctx.Done()
	return nil
}

func (c *Controller) worker(ctx context.Context) {
	for c.processNext(ctx) {
	}
}

func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)
	inv, err := c.inventory()
	if err == nil {
		err = c.sync(ctx, name, inv)
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "Sync failed, retrying", "pool", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// inventory indexes the cached slices and claims.
func (c *Controller) inventory() (*Inventory, error) {
	slices, err := c.slices.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceSlices: %w", err)
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	return NewInventory(c.driverName, slices, claims), nil
}

// poolLister reads typed pools from the informer's cache.
type poolLister struct {
	indexer cache.Indexer
}

func (l *poolLister) Get(name string) (*v1alpha1.RdmaPool, error) {
	obj, ok, err := l.indexer.GetByKey(name)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, apierrors.NewNotFound(PoolResource.GroupResource(), name)
	}
	return obj.(*v1alpha1.RdmaPool), nil
}

func (l *poolLister) List() ([]*v1alpha1.RdmaPool, error) {
	var out []*v1alpha1.RdmaPool
	for _, obj := range l.indexer.List() {
		out = append(out, obj.(*v1alpha1.RdmaPool))
	}
	return out, nil
}

func (l *poolLister) names() []string {
	return l.indexer.ListKeys()
}

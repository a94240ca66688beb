// Package controller is the driver's cluster-wide controller: it keeps one DeviceClass
// per RdmaPool whose CEL selects exactly the pool's ports in the pool's mode, and
// reports in each pool's status how many ports and shares exist and are in use.
package controller

import (
	"context"
	"fmt"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned"
	rdmainformers "github.com/rdma-dra/rdma-dra-driver/pkg/client/informers/externalversions"
	rdmalisters "github.com/rdma-dra/rdma-dra-driver/pkg/client/listers/rdma.dra.io/v1alpha1"
)

// usageDelay batches status updates: slices and claims change in bursts (a node
// republishing, a job of many pods starting), and one recount per burst is enough.
const usageDelay = time.Second

// Controller reconciles RdmaPools into DeviceClasses and pool status.
type Controller struct {
	driverName string
	kube       kubernetes.Interface
	rdma       versioned.Interface
	metrics    *Metrics

	pools   rdmalisters.RdmaPoolLister
	classes resourcelisters.DeviceClassLister

	// index is the slices and claims, kept by the informers' handlers; cel the
	// pools' compiled selectors.
	index *index
	cel   *celCache

	poolInformer, classInformer, sliceInformer, claimInformer cache.SharedIndexInformer
	queue                                                     workqueue.TypedRateLimitingInterface[string]
}

// PoolResource is the API resource of RdmaPools.
var PoolResource = v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.RdmaPoolResource)

// New wires a controller to the API: informers on RdmaPools (through rdma, the generated
// clientset of pkg/client), this controller's DeviceClasses, the driver's ResourceSlices
// and all ResourceClaims.
func New(driverName string, kube kubernetes.Interface, rdma versioned.Interface, metrics *Metrics) *Controller {
	c := &Controller{
		driverName: driverName,
		kube:       kube,
		rdma:       rdma,
		metrics:    metrics,
		index:      newIndex(driverName),
		cel:        newCELCache(driverName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "rdmapools"}),
	}
	pools := rdmainformers.NewSharedInformerFactory(rdma, 0).Rdma().V1alpha1().RdmaPools()
	c.poolInformer, c.pools = pools.Informer(), pools.Lister()

	factory := informers.NewSharedInformerFactory(kube, 0)
	classes := factory.Resource().V1().DeviceClasses()
	c.classInformer, c.classes = classes.Informer(), classes.Lister()
	c.sliceInformer = informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = resourceapi.ResourceSliceSelectorDriver + "=" + driverName
	})).Resource().V1().ResourceSlices().Informer()
	c.claimInformer = factory.Resource().V1().ResourceClaims().Informer()
	return c
}

// registration is an informer and its event handler.
type registration struct {
	informer cache.SharedIndexInformer
	handler  cache.ResourceEventHandler
}

// handlers are the event handlers of the four informers. Pools are few: any change of
// one may change another's extended resource name conflict, so every pool is looked at
// again, and the pool of the event itself, which the lister no longer has once it is
// deleted: its sync deletes its DeviceClass. A slice or claim event enqueues only the
// pools whose counts it can change.
func (c *Controller) handlers(ctx context.Context) []registration {
	return []registration{
		{c.poolInformer, handler(func(obj any, _ bool) {
			if pool, ok := obj.(*v1alpha1.RdmaPool); ok {
				c.queue.Add(pool.Name)
			}
			c.enqueueAll()
		})},
		{c.classInformer, handler(func(obj any, _ bool) {
			if class, ok := obj.(*resourceapi.DeviceClass); ok {
				c.queue.Add(class.Name)
				if class.Spec.ExtendedResourceName != nil {
					c.enqueueAll()
				}
			}
		})},
		{c.sliceInformer, handler(func(obj any, deleted bool) { c.onSlice(ctx, obj, deleted) })},
		{c.claimInformer, handler(func(obj any, deleted bool) { c.onClaim(ctx, obj, deleted) })},
	}
}

// onSlice indexes a slice and enqueues, after usageDelay, the pools it can change
// (index.updateSlice).
func (c *Controller) onSlice(ctx context.Context, obj any, deleted bool) {
	s, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return
	}
	name := s.Name
	if deleted {
		s = nil
	}
	c.enqueueUsage(c.index.updateSlice(ctx, name, s))
}

// onClaim indexes a claim's allocation and enqueues, after usageDelay, the pools it can
// change (index.updateClaim).
func (c *Controller) onClaim(ctx context.Context, obj any, deleted bool) {
	claim, ok := obj.(*resourceapi.ResourceClaim)
	if !ok {
		return
	}
	key := claim.Namespace + "/" + claim.Name
	if deleted {
		claim = nil
	}
	c.enqueueUsage(c.index.updateClaim(ctx, key, claim))
}

// handler calls f for every add, update and delete, with the new object (the last
// known for a delete, tombstones unwrapped) and whether it was deleted.
func handler(f func(obj any, deleted bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f(obj, false) },
		UpdateFunc: func(_, obj any) { f(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			f(obj, true)
		},
	}
}

func (c *Controller) enqueueAll() {
	pools, _ := c.pools.List(labels.Everything())
	for _, p := range pools {
		c.queue.Add(p.Name)
	}
}

func (c *Controller) enqueueUsage(pools sets.Set[string]) {
	for name := range pools {
		c.queue.AddAfter(name, usageDelay)
	}
}

// Run starts the informers, waits until their caches are synced and their handlers have
// seen every object, and processes the queue with workers goroutines until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)
	var synced []cache.InformerSynced
	for _, r := range c.handlers(ctx) {
		reg, err := r.informer.AddEventHandler(r.handler)
		if err != nil {
			return fmt.Errorf("add event handler: %w", err)
		}
		synced = append(synced, reg.HasSynced)
	}
	for _, inf := range []cache.SharedIndexInformer{c.poolInformer, c.classInformer, c.sliceInformer, c.claimInformer} {
		go inf.RunWithContext(ctx)
	}
	// The index is built by the handlers, so the workers wait for them, not only for
	// the informers' stores.
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
	if err := c.sync(ctx, name); err != nil {
		klog.FromContext(ctx).Error(err, "Sync failed, retrying", "pool", name)
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// Labels of the DeviceClasses the controller writes.
const (
	// ManagedByLabel marks a DeviceClass as the controller's; it never touches a class
	// without it (and without an owner reference to the pool of the same name).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of ManagedByLabel.
	ManagedByValue = "rdma-dra-controller"
	// PoolLabel names the pool a DeviceClass belongs to.
	PoolLabel = v1alpha1.GroupName + "/pool"
)

// condition is the Ready condition a sync arrives at.
type condition struct {
	ready           bool
	reason, message string
}

// sync brings the DeviceClass of the pool called name in line with the pool and writes
// the pool's status. It is idempotent and reads everything from the caches.
func (c *Controller) sync(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx).WithValues("pool", name)
	ctx = klog.NewContext(ctx, logger)
	pool, err := c.pools.Get(name)
	if apierrors.IsNotFound(err) {
		c.metrics.forget(name)
		c.index.forget(name)
		c.cel.forget(name)
		return c.deleteClass(ctx, name)
	}
	if err != nil {
		return fmt.Errorf("get pool: %w", err)
	}
	if pool.DeletionTimestamp != nil {
		// The garbage collector removes the class once the pool is gone.
		return nil
	}

	existing, err := c.classes.Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get DeviceClass: %w", err)
	}
	if apierrors.IsNotFound(err) {
		existing = nil
	}

	cond := condition{ready: true, reason: v1alpha1.ReasonDeviceClassReady,
		message: fmt.Sprintf("DeviceClass %s selects the pool's ports", name)}
	desired, problem := c.desiredClass(pool)
	var syncErr error
	switch {
	case existing != nil && !owns(existing, name):
		cond = condition{reason: v1alpha1.ReasonDeviceClassConflict,
			message: fmt.Sprintf("DeviceClass %s exists and is not managed by this controller; rename the pool or remove the class", name)}
		existing = nil // not ours: its selector says nothing about the pool
	case problem != nil && problem.reason != v1alpha1.ReasonExtendedResourceNameConflict:
		cond = *problem
		if existing != nil {
			cond.message += "; the DeviceClass keeps its last valid spec"
		}
	default:
		if problem != nil {
			cond = *problem
		}
		written, err := c.writeClass(ctx, existing, desired)
		if err != nil {
			syncErr = err
			cond = condition{reason: v1alpha1.ReasonDeviceClassError, message: err.Error()}
		} else {
			existing = written
		}
	}

	var usage Usage
	classExpr := ""
	if existing != nil && len(existing.Spec.Selectors) == 1 && existing.Spec.Selectors[0].CEL != nil {
		classExpr = existing.Spec.Selectors[0].CEL.Expression
	}
	// Without a class of its own, or with one whose selector does not compile, the
	// pool counts nothing, and events need not enqueue it.
	if prog, err := c.cel.class(name, classExpr); classExpr == "" || err != nil {
		c.index.forget(name)
	} else {
		usage = c.index.usage(ctx, name, pool.Spec.Mode, prog)
	}
	className := ""
	if existing != nil {
		className = existing.Name
	}
	if err := c.writeStatus(ctx, pool, className, usage, cond); err != nil {
		syncErr = errors.Join(syncErr, err)
	}
	c.metrics.set(pool, usage, cond.ready)
	logger.V(4).Info("Synced pool", "ready", cond.ready, "reason", cond.reason, "usage", usage)
	return syncErr
}

// desiredClass is the DeviceClass the pool asks for, or the condition that says why
// the spec cannot be written. An extended resource name conflict still yields a class,
// without the name.
func (c *Controller) desiredClass(pool *v1alpha1.RdmaPool) (*resourceapi.DeviceClass, *condition) {
	if errs := pool.Validate(); len(errs) > 0 {
		reason := v1alpha1.ReasonInvalidSelector
		if slices.ContainsFunc(errs, func(e *field.Error) bool { return strings.HasPrefix(e.Field, "spec.config") }) {
			reason = v1alpha1.ReasonInvalidConfig
		}
		return nil, &condition{reason: reason, message: errs.ToAggregate().Error()}
	}
	expr, err := c.cel.desired(pool)
	if err != nil {
		return nil, &condition{reason: v1alpha1.ReasonInvalidSelector, message: "CEL selector: " + err.Error()}
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:   pool.Name,
			Labels: map[string]string{ManagedByLabel: ManagedByValue, PoolLabel: pool.Name},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: v1alpha1.RdmaPoolKind,
				Name: pool.Name, UID: pool.UID, Controller: ptr.To(true),
			}},
		},
		Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}},
		},
	}
	if pool.Spec.Config != nil {
		class.Spec.Config = []resourceapi.DeviceClassConfiguration{{DeviceConfiguration: resourceapi.DeviceConfiguration{
			Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: c.driverName, Parameters: runtime.RawExtension{Raw: pool.Spec.Config.Raw}},
		}}}
	}
	if n := pool.Spec.ExtendedResourceName; n != nil {
		if holder := c.extendedResourceHolder(pool, *n); holder != "" {
			return class, &condition{reason: v1alpha1.ReasonExtendedResourceNameConflict,
				message: fmt.Sprintf("%s also serves extended resource %s and keeps it; the DeviceClass is written without it", holder, *n)}
		}
		class.Spec.ExtendedResourceName = ptr.To(*n)
	}
	return class, nil
}

// extendedResourceHolder returns who else serves the extended resource name and wins:
// a DeviceClass that is not ours, or an older pool (ties broken by name). Empty: the
// pool may have it.
func (c *Controller) extendedResourceHolder(pool *v1alpha1.RdmaPool, name string) string {
	classes, _ := c.classes.List(labels.Everything())
	for _, class := range classes {
		if ptr.Deref(class.Spec.ExtendedResourceName, "") == name && !owns(class, class.Name) {
			return "DeviceClass " + class.Name
		}
	}
	pools, _ := c.pools.List(labels.Everything())
	older := func(a, b *v1alpha1.RdmaPool) bool {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name)) < 0
	}
	for _, other := range pools {
		if other.Name != pool.Name && other.DeletionTimestamp == nil &&
			ptr.Deref(other.Spec.ExtendedResourceName, "") == name && older(other, pool) {
			return "RdmaPool " + other.Name
		}
	}
	return ""
}

// owns reports whether class is the controller's class of the pool called pool: it has
// the managed-by label and a controller reference to an RdmaPool of that name. The UID
// is not compared, so that a pool deleted and created again adopts its class.
func owns(class *resourceapi.DeviceClass, pool string) bool {
	if class.Labels[ManagedByLabel] != ManagedByValue {
		return false
	}
	ref := metav1.GetControllerOf(class)
	return ref != nil && ref.Kind == v1alpha1.RdmaPoolKind && ref.Name == pool &&
		ref.APIVersion == v1alpha1.SchemeGroupVersion.String()
}

// writeClass creates desired or updates existing to it, and returns what is stored.
func (c *Controller) writeClass(ctx context.Context, existing, desired *resourceapi.DeviceClass) (*resourceapi.DeviceClass, error) {
	logger := klog.FromContext(ctx)
	if existing == nil {
		created, err := c.kube.ResourceV1().DeviceClasses().Create(ctx, desired, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create DeviceClass %s: %w", desired.Name, err)
		}
		logger.Info("Created DeviceClass", "deviceClass", desired.Name)
		return created, nil
	}
	if apiequality.Semantic.DeepEqual(existing.Spec, desired.Spec) &&
		apiequality.Semantic.DeepEqual(existing.OwnerReferences, desired.OwnerReferences) &&
		isSubset(desired.Labels, existing.Labels) {
		return existing, nil
	}
	update := existing.DeepCopy()
	update.Spec = desired.Spec
	update.OwnerReferences = desired.OwnerReferences
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	for k, v := range desired.Labels {
		update.Labels[k] = v
	}
	updated, err := c.kube.ResourceV1().DeviceClasses().Update(ctx, update, metav1.UpdateOptions{})
	if err != nil {
		return nil, fmt.Errorf("update DeviceClass %s: %w", desired.Name, err)
	}
	logger.Info("Updated DeviceClass", "deviceClass", desired.Name)
	return updated, nil
}

// deleteClass removes the class of a pool that is gone, if it is the controller's. The
// garbage collector would too; doing it here makes it immediate and covers clusters
// where the class lost its owner reference.
//
// Ownership is decided on the cached class, so the delete is made conditional on exactly
// that object: the UID keeps a class that was replaced in the meantime, the
// resourceVersion one that was changed, such as one an admin took over by removing the
// managed-by label after the cache saw it. Either way the API server answers Conflict,
// the class is left alone, and its update event brings the name back to a sync that
// sees it as it is.
func (c *Controller) deleteClass(ctx context.Context, name string) error {
	logger := klog.FromContext(ctx)
	class, err := c.classes.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get DeviceClass: %w", err)
	}
	if !owns(class, name) {
		return nil
	}
	err = c.kube.ResourceV1().DeviceClasses().Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{
		UID: ptr.To(class.UID), ResourceVersion: ptr.To(class.ResourceVersion),
	}})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case apierrors.IsConflict(err):
		logger.V(2).Info("DeviceClass of a deleted pool changed since it was cached, not deleted", "deviceClass", name)
		return nil
	case err != nil:
		return fmt.Errorf("delete DeviceClass %s: %w", name, err)
	}
	logger.Info("Deleted DeviceClass of a deleted pool", "deviceClass", name)
	return nil
}

// writeStatus updates the pool's status when it changed.
func (c *Controller) writeStatus(ctx context.Context, pool *v1alpha1.RdmaPool, className string, u Usage, cond condition) error {
	status := v1alpha1.RdmaPoolStatus{
		ObservedGeneration: pool.Generation,
		DeviceClassName:    className,
		Nodes:              u.Nodes, Ports: u.Ports, Shares: u.Shares,
		AllocatedPorts: u.AllocatedPorts, AllocatedShares: u.AllocatedShares,
		Allocated: u.Allocated, Free: u.Free,
		Conditions: slices.Clone(pool.Status.Conditions),
	}
	ready := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse,
		Reason: cond.reason, Message: cond.message, ObservedGeneration: pool.Generation}
	if cond.ready {
		ready.Status = metav1.ConditionTrue
	}
	// SetStatusCondition keeps lastTransitionTime unless the status flips.
	meta.SetStatusCondition(&status.Conditions, ready)
	if apiequality.Semantic.DeepEqual(status, pool.Status) {
		return nil
	}
	update := pool.DeepCopy()
	update.Status = status
	if _, err := c.rdma.RdmaV1alpha1().RdmaPools().UpdateStatus(ctx, update, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("update status: %w", err)
	}
	return nil
}

func isSubset(sub, super map[string]string) bool {
	for k, v := range sub {
		if w, ok := super[k]; !ok || w != v {
			return false
		}
	}
	return true
}

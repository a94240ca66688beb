package deployments

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	rdmafake "github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned/fake"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// RBAC cannot limit the controller's DeviceClass writes to its own classes (create has no
// name, no verb a label); templates/controller-policy.yaml does. These tests pin that the
// policy exists, binds with Deny, applies to the controller's service account alone, what
// its CEL admits and denies, and that it admits every write the controller really makes.

// controllerUser is the user name of the service account the controller's pods run as,
// which the manifests must create.
func controllerUser(t *testing.T, objs []object) string {
	t.Helper()
	d, _ := controllerDeployment(t, objs)
	name := d.Spec.Template.Spec.ServiceAccountName
	for _, sa := range only[*corev1.ServiceAccount](objs) {
		if sa.Name == name && sa.Namespace == d.Namespace {
			return serviceaccount.MakeUsername(sa.Namespace, sa.Name)
		}
	}
	t.Fatalf("the controller runs as %q, which the manifests do not create", name)
	return ""
}

// deviceClassPolicy returns the policy on the controller's DeviceClass writes, checked to
// be bound with Deny, to fail closed and to match every write of a DeviceClass.
func deviceClassPolicy(t *testing.T, objs []object) *policyEvaluator {
	t.Helper()
	policy, binding := policyNamed(t, objs, "-controller-deviceclasses")
	checkDenyBinding(t, policy, binding)
	if binding.Spec.MatchResources != nil || binding.Spec.ParamRef != nil {
		t.Errorf("binding %s narrows the policy: %+v", binding.Name, binding.Spec)
	}
	for i, v := range policy.Spec.Validations {
		if v.Reason == nil || *v.Reason != metav1.StatusReasonForbidden {
			t.Errorf("policy %s: validation %d answers %v, want Forbidden: the writer is refused, the class is not invalid", policy.Name, i, v.Reason)
		}
	}
	rules := policy.Spec.MatchConstraints.ResourceRules
	wantOps := []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete}
	if len(rules) != 1 || !slices.Equal(rules[0].APIGroups, []string{resourceapi.GroupName}) ||
		!slices.Equal(rules[0].APIVersions, []string{"*"}) || !slices.Equal(rules[0].Resources, []string{"deviceclasses"}) ||
		!slices.Equal(rules[0].Operations, wantOps) {
		t.Errorf("policy %s matches %+v, want create, update and delete of resource.k8s.io/*/deviceclasses", policy.Name, rules)
	}
	return compilePolicy(t, policy)
}

// admit evaluates the policy on one request of user; applies says whether the policy's
// match conditions took it.
func admit(t *testing.T, p *policyEvaluator, user, op, name string, obj, old *resourceapi.DeviceClass) (applies bool, denials []string) {
	t.Helper()
	request := map[string]any{
		"operation": op,
		"name":      name,
		"userInfo":  map[string]any{"username": user},
	}
	applies, denials, err := p.evaluate(request, toUnstructured(t, obj), toUnstructured(t, old))
	if err != nil {
		t.Fatal(err)
	}
	return applies, denials
}

// unstructuredOrNil is toUnstructured for goroutines other than the test's: a class that
// does not convert (which cannot happen for a typed DeviceClass) becomes null.
func unstructuredOrNil(class *resourceapi.DeviceClass) any {
	if class == nil {
		return nil
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(class)
	if err != nil {
		return nil
	}
	return u
}

func TestControllerDeviceClassPolicy(t *testing.T) {
	class := func(labels map[string]string) *resourceapi.DeviceClass {
		return &resourceapi.DeviceClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: "rdma-shared", Labels: labels},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: `device.driver == "rdma.dra.io"`}}}},
		}
	}
	// The controller's label comes from its code, so that the chart cannot drift from it.
	own := class(map[string]string{controller.ManagedByLabel: controller.ManagedByValue, controller.PoolLabel: "rdma-shared", "team": "ml"})
	foreign := class(nil)
	helm := class(map[string]string{controller.ManagedByLabel: "Helm"})
	otherLabels := class(map[string]string{"team": "ml"})
	const (
		notOurs    = "DeviceClass rdma-shared is not one of them"
		notMarked  = "DeviceClass rdma-shared would not have it"
		labelNamed = controller.ManagedByLabel + "=" + controller.ManagedByValue
	)

	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			policy := deviceClassPolicy(t, objs)
			user := controllerUser(t, objs)
			_, saName, err := serviceaccount.SplitUsername(user)
			if err != nil {
				t.Fatal(err)
			}
			tests := []struct {
				name     string
				user     string
				op       string
				obj, old *resourceapi.DeviceClass
				// wantDeny: each must be in a denial; none: admitted.
				wantDeny []string
				// notMatched: the policy does not apply to the user.
				notMatched bool
			}{
				{name: "create own", op: "CREATE", obj: own},
				{name: "update own", op: "UPDATE", obj: own, old: own},
				{name: "delete own", op: "DELETE", old: own},
				{name: "create unlabeled", op: "CREATE", obj: foreign, wantDeny: []string{notMarked, labelNamed}},
				{name: "create with Helm's label", op: "CREATE", obj: helm, wantDeny: []string{notMarked}},
				{name: "update a foreign class", op: "UPDATE", obj: foreign, old: foreign, wantDeny: []string{notOurs, notMarked}},
				{name: "adopt a foreign class", op: "UPDATE", obj: own, old: otherLabels, wantDeny: []string{notOurs, labelNamed}},
				{name: "disown its class", op: "UPDATE", obj: otherLabels, old: own, wantDeny: []string{notMarked}},
				{name: "take over Helm's class", op: "UPDATE", obj: own, old: helm, wantDeny: []string{notOurs}},
				{name: "delete a foreign class", op: "DELETE", old: foreign, wantDeny: []string{notOurs}},
				{name: "delete a class with other labels", op: "DELETE", old: otherLabels, wantDeny: []string{notOurs}},
				{name: "an admin is not matched", user: "kubernetes-admin", op: "DELETE", old: foreign, notMatched: true},
				{name: "the plugin is not matched", user: pluginUser(t, objs, "node-a").name, op: "CREATE", obj: foreign, notMatched: true},
				{name: "a namesake in another namespace is not matched", user: serviceaccount.MakeUsername("default", saName),
					op: "DELETE", old: foreign, notMatched: true},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					u := user
					if tt.user != "" {
						u = tt.user
					}
					applies, denials := admit(t, policy, u, tt.op, "rdma-shared", tt.obj, tt.old)
					if applies == tt.notMatched {
						t.Fatalf("policy applies to %s: %v, want %v", u, applies, !tt.notMatched)
					}
					got := strings.Join(denials, "; ")
					if len(tt.wantDeny) == 0 && got != "" {
						t.Errorf("denied: %s", got)
					}
					for _, want := range tt.wantDeny {
						if !strings.Contains(got, want) {
							t.Errorf("denials %q, want one containing %q", got, want)
						}
					}
				})
			}
		})
	}
}

// TestControllerWritesPassItsPolicy runs the controller on fake clients whose DeviceClass
// writes first go through the chart's policy as the controller's service account: the
// controller creates, updates and deletes the class of a pool and never touches the
// foreign class of another pool, and the policy denies none of its writes (a policy that
// did would stop the controller on every cluster).
func TestControllerWritesPassItsPolicy(t *testing.T) {
	// The generated fake clientset sends no bookmark after a watch's initial events,
	// which a watch-list informer of pools would wait for.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	objs := decodeFile(t, staticFiles[0])
	policy := deviceClassPolicy(t, objs)
	user := controllerUser(t, objs)

	foreign := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "foreign"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}}}
	kube := fake.NewClientset(foreign)
	gvr := resourceapi.SchemeGroupVersion.WithResource("deviceclasses")
	var (
		mu      sync.Mutex
		written []string // verb and name of every admitted write
		denied  []string
	)
	kube.PrependReactor("*", "deviceclasses", func(a k8stesting.Action) (bool, runtime.Object, error) {
		var obj, old *resourceapi.DeviceClass
		var name string
		switch a.GetVerb() {
		case "create", "update":
			obj = a.(interface{ GetObject() runtime.Object }).GetObject().(*resourceapi.DeviceClass)
			name = obj.Name
		case "delete":
			name = a.(k8stesting.DeleteAction).GetName()
		default:
			return false, nil, nil
		}
		if a.GetVerb() != "create" {
			stored, err := kube.Tracker().Get(gvr, "", name)
			if err != nil {
				return true, nil, err
			}
			old = stored.(*resourceapi.DeviceClass)
		}
		// Not admit: this runs on the controller's goroutines, where t.Fatal must not.
		request := map[string]any{"operation": strings.ToUpper(a.GetVerb()), "name": name, "userInfo": map[string]any{"username": user}}
		_, denials, err := policy.evaluate(request, unstructuredOrNil(obj), unstructuredOrNil(old))
		if err != nil {
			denials = append(denials, err.Error())
		}
		mu.Lock()
		defer mu.Unlock()
		if len(denials) > 0 {
			denied = append(denied, fmt.Sprintf("%s %s: %s", a.GetVerb(), name, strings.Join(denials, "; ")))
			return true, nil, apierrors.NewForbidden(gvr.GroupResource(), name, errors.New(strings.Join(denials, "; ")))
		}
		written = append(written, a.GetVerb()+" "+name)
		return false, nil, nil
	})
	rdma := rdmafake.NewSimpleClientset()
	// The fake replaces the whole pool on a status update; the API server's status
	// subresource takes only the status. Without this the controller's status write of
	// its cached pool could undo the test's spec change.
	pools := rdma.RdmaV1alpha1().RdmaPools()
	poolGVR := v1alpha1.SchemeGroupVersion.WithResource(v1alpha1.RdmaPoolResource)
	rdma.PrependReactor("update", v1alpha1.RdmaPoolResource, func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		update := a.(k8stesting.UpdateAction).GetObject().(*v1alpha1.RdmaPool)
		stored, err := rdma.Tracker().Get(poolGVR, "", update.Name)
		if err != nil {
			return true, nil, err
		}
		pool := stored.(*v1alpha1.RdmaPool).DeepCopy()
		pool.Status = update.Status
		return true, pool, rdma.Tracker().Update(poolGVR, pool, "")
	})

	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	c := controller.New(devicemodel.DefaultDriverName, kube, rdma, controller.NewMetrics())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	classes := kube.ResourceV1().DeviceClasses()
	// await polls the class called name until cond holds for it (nil: it is gone).
	await := func(what, name string, cond func(*resourceapi.DeviceClass) bool) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			class, err := classes.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				class, err = nil, nil
			}
			return err == nil && cond(class), err
		})
		if err != nil {
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("%s: %v; denied writes: %q", what, err, denied)
		}
	}
	for _, name := range []string{"ib-shared", "foreign"} {
		pool := &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)},
			Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeShared}}
		if _, err := pools.Create(ctx, pool, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	await("class created", "ib-shared", func(c *resourceapi.DeviceClass) bool { return c != nil })

	pool, err := pools.Get(ctx, "ib-shared", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pool.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	if _, err := pools.Update(ctx, pool, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	await("class updated", "ib-shared", func(c *resourceapi.DeviceClass) bool {
		return c != nil && strings.Contains(c.Spec.Selectors[0].CEL.Expression, "InfiniBand")
	})

	// The foreign pool goes first: with one worker its sync comes before the one that
	// deletes ib-shared's class, which the test waits for.
	for _, name := range []string{"foreign", "ib-shared"} {
		if err := pools.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	await("class deleted", "ib-shared", func(c *resourceapi.DeviceClass) bool { return c == nil })

	mu.Lock()
	defer mu.Unlock()
	if len(denied) > 0 {
		t.Errorf("the policy denied the controller's writes:\n%s", strings.Join(denied, "\n"))
	}
	// A create may come twice (a sync on a cache that does not have the class yet gets
	// AlreadyExists from the API server, after admission), so the writes are a set.
	if got, want := sets.New(written...), sets.New("create ib-shared", "update ib-shared", "delete ib-shared"); !got.Equal(want) {
		t.Errorf("DeviceClass writes %q, want %q (and none of the foreign class)", sets.List(got), sets.List(want))
	}
	if got, err := classes.Get(ctx, "foreign", metav1.GetOptions{}); err != nil || got.Spec.Selectors[0].CEL.Expression != "true" {
		t.Errorf("the foreign class changed: %+v, %v", got, err)
	}
}

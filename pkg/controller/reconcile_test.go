package controller

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes/fake"
	resourcelisters "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	rdmafake "github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned/fake"
	rdmalisters "github.com/rdma-dra/rdma-dra-driver/pkg/client/listers/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// harness is a controller on fake clients whose caches are refreshed from the clients
// before every sync, so that each step sees what the previous one wrote. DeviceClass
// writes are conditional as in the API server (withOptimisticConcurrency).
type harness struct {
	t       *testing.T
	ctx     context.Context
	c       *Controller
	kube    *fake.Clientset
	rdma    *rdmafake.Clientset
	indexes map[string]cache.Indexer
	// indexed are the slices and claims the index has, as slice/<name> and
	// claim/<namespace>/<name>.
	indexed sets.Set[string]
}

func newHarness(t *testing.T, kubeObjs ...runtime.Object) *harness {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	h := &harness{t: t, ctx: ctx, kube: fake.NewClientset(kubeObjs...), rdma: rdmafake.NewSimpleClientset(), indexes: map[string]cache.Indexer{}}
	withOptimisticConcurrency(h.kube)
	for _, kind := range []string{"pools", "classes"} {
		h.indexes[kind] = cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	}
	h.c = &Controller{
		driverName: devicemodel.DefaultDriverName,
		kube:       h.kube,
		rdma:       h.rdma,
		metrics:    NewMetrics(),
		pools:      rdmalisters.NewRdmaPoolLister(h.indexes["pools"]),
		classes:    resourcelisters.NewDeviceClassLister(h.indexes["classes"]),
		index:      newIndex(devicemodel.DefaultDriverName),
		cel:        newCELCache(devicemodel.DefaultDriverName),
	}
	return h
}

// refresh replaces the caches with what the fake clients hold, and the index with one
// the informers' handlers would build of it.
func (h *harness) refresh() {
	h.t.Helper()
	ctx := h.ctx
	replace := func(kind string, objs []any) {
		if err := h.indexes[kind].Replace(objs, ""); err != nil {
			h.t.Fatal(err)
		}
	}
	var objs []any
	pools, err := h.rdma.RdmaV1alpha1().RdmaPools().List(ctx, metav1.ListOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	for i := range pools.Items {
		objs = append(objs, &pools.Items[i])
	}
	replace("pools", objs)
	classes, _ := h.kube.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
	objs = nil
	for i := range classes.Items {
		objs = append(objs, &classes.Items[i])
	}
	replace("classes", objs)
	// The index gets the events the informers would deliver: every object again (an
	// update without changes enqueues nothing) and a delete for what is gone.
	slices, _ := h.kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	gone := h.indexed
	h.indexed = sets.New[string]()
	for i := range slices.Items {
		h.c.index.updateSlice(ctx, slices.Items[i].Name, &slices.Items[i])
		h.indexed.Insert("slice/" + slices.Items[i].Name)
	}
	claims, _ := h.kube.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	for i := range claims.Items {
		key := claims.Items[i].Namespace + "/" + claims.Items[i].Name
		h.c.index.updateClaim(ctx, key, &claims.Items[i])
		h.indexed.Insert("claim/" + key)
	}
	for key := range gone.Difference(h.indexed) {
		if kind, name, _ := strings.Cut(key, "/"); kind == "slice" {
			h.c.index.updateSlice(ctx, name, nil)
		} else {
			h.c.index.updateClaim(ctx, name, nil)
		}
	}
}

// sync refreshes the caches and syncs one pool.
func (h *harness) sync(name string) error {
	h.t.Helper()
	h.refresh()
	return h.c.sync(h.ctx, name)
}

func (h *harness) putPool(pool *v1alpha1.RdmaPool) {
	h.t.Helper()
	client := h.rdma.RdmaV1alpha1().RdmaPools()
	if _, err := client.Get(h.ctx, pool.Name, metav1.GetOptions{}); err == nil {
		_, err = client.Update(h.ctx, pool, metav1.UpdateOptions{})
		if err != nil {
			h.t.Fatal(err)
		}
		return
	}
	if _, err := client.Create(h.ctx, pool, metav1.CreateOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) pool(name string) *v1alpha1.RdmaPool {
	h.t.Helper()
	p, err := h.rdma.RdmaV1alpha1().RdmaPools().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

func (h *harness) class(name string) *resourceapi.DeviceClass {
	h.t.Helper()
	c, err := h.kube.ResourceV1().DeviceClasses().Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return c
}

func (h *harness) ready(name string) metav1.Condition {
	h.t.Helper()
	c := meta.FindStatusCondition(h.pool(name).Status.Conditions, v1alpha1.ConditionReady)
	if c == nil {
		h.t.Fatalf("pool %s has no Ready condition", name)
	}
	return *c
}

func newPool(name string, mode v1alpha1.PoolMode, created time.Time) *v1alpha1.RdmaPool {
	return &v1alpha1.RdmaPool{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1, CreationTimestamp: metav1.NewTime(created)},
		Spec:       v1alpha1.RdmaPoolSpec{Mode: mode},
	}
}

func rawConfig(t *testing.T, s string) *runtime.RawExtension {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	raw, _ := json.Marshal(v)
	return &runtime.RawExtension{Raw: raw}
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestSyncCreatesUpdatesAndDeletesTheClass(t *testing.T) {
	h := newHarness(t)
	pool := newPool("rdma-shared", v1alpha1.PoolModeShared, t0)
	pool.Spec.ExtendedResourceName = ptr.To("rdma/hca_shared_devices_a")
	h.putPool(pool)
	if err := h.sync("rdma-shared"); err != nil {
		t.Fatal(err)
	}
	class := h.class("rdma-shared")
	if class == nil {
		t.Fatal("no DeviceClass created")
	}
	wantCEL, _ := PoolCEL(devicemodel.DefaultDriverName, &pool.Spec)
	if got := class.Spec.Selectors[0].CEL.Expression; got != wantCEL {
		t.Errorf("CEL %q, want %q", got, wantCEL)
	}
	if got := ptr.Deref(class.Spec.ExtendedResourceName, ""); got != "rdma/hca_shared_devices_a" {
		t.Errorf("extendedResourceName %q", got)
	}
	if ref := metav1.GetControllerOf(class); ref == nil || ref.UID != pool.UID || ref.Kind != "RdmaPool" {
		t.Errorf("owner reference %+v", ref)
	}
	if class.Labels[ManagedByLabel] != ManagedByValue || class.Labels[PoolLabel] != "rdma-shared" {
		t.Errorf("labels %v", class.Labels)
	}
	st := h.pool("rdma-shared").Status
	if c := h.ready("rdma-shared"); c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonDeviceClassReady || st.ObservedGeneration != 1 || st.DeviceClassName != "rdma-shared" {
		t.Errorf("status %+v", st)
	}

	// An admin's label on the class survives an update of the pool.
	class.Labels["team"] = "ml"
	if _, err := h.kube.ResourceV1().DeviceClasses().Update(h.ctx, class, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool = h.pool("rdma-shared")
	pool.Generation = 2
	pool.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	pool.Spec.Config = rawConfig(t, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"unlimited"}`)
	h.putPool(pool)
	if err := h.sync("rdma-shared"); err != nil {
		t.Fatal(err)
	}
	class = h.class("rdma-shared")
	if !strings.Contains(class.Spec.Selectors[0].CEL.Expression, `link_layer in ["InfiniBand"]`) {
		t.Errorf("CEL not updated: %s", class.Spec.Selectors[0].CEL.Expression)
	}
	if len(class.Spec.Config) != 1 || class.Spec.Config[0].Opaque.Driver != "rdma.dra.io" ||
		!strings.Contains(string(class.Spec.Config[0].Opaque.Parameters.Raw), `"memlock":"unlimited"`) {
		t.Errorf("config %+v", class.Spec.Config)
	}
	if class.Labels["team"] != "ml" {
		t.Errorf("the admin's label is gone: %v", class.Labels)
	}
	if got := h.pool("rdma-shared").Status.ObservedGeneration; got != 2 {
		t.Errorf("observedGeneration %d, want 2", got)
	}

	// Another sync without changes writes nothing.
	h.kube.ClearActions()
	h.rdma.ClearActions()
	if err := h.sync("rdma-shared"); err != nil {
		t.Fatal(err)
	}
	for _, a := range append(h.kube.Actions(), h.rdma.Actions()...) {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			t.Errorf("unexpected %s %s on a sync without changes", a.GetVerb(), a.GetResource().Resource)
		}
	}

	// Deleting the pool deletes its class.
	if err := h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "rdma-shared", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := h.sync("rdma-shared"); err != nil {
		t.Fatal(err)
	}
	if h.class("rdma-shared") != nil {
		t.Error("DeviceClass still exists after its pool was deleted")
	}
	if n := testutil.CollectAndCount(h.c.metrics.gauges[metricPorts]); n != 0 {
		t.Errorf("%d port series left for a deleted pool", n)
	}
}

func TestSyncLeavesForeignClassesAlone(t *testing.T) {
	foreign := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "rdma-exclusive"},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "true"}}}}}
	h := newHarness(t, foreign)
	h.putPool(newPool("rdma-exclusive", v1alpha1.PoolModeExclusive, t0))
	if err := h.sync("rdma-exclusive"); err != nil {
		t.Fatal(err)
	}
	if c := h.ready("rdma-exclusive"); c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonDeviceClassConflict {
		t.Errorf("Ready %+v, want False/DeviceClassConflict", c)
	}
	if got := h.class("rdma-exclusive"); got.Spec.Selectors[0].CEL.Expression != "true" || got.Labels != nil {
		t.Errorf("foreign class was changed: %+v", got)
	}
	// Deleting the pool does not delete someone else's class either.
	_ = h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "rdma-exclusive", metav1.DeleteOptions{})
	if err := h.sync("rdma-exclusive"); err != nil {
		t.Fatal(err)
	}
	if h.class("rdma-exclusive") == nil {
		t.Error("foreign class was deleted")
	}
}

func TestSyncExtendedResourceNameConflict(t *testing.T) {
	h := newHarness(t)
	older := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	younger := newPool("all-shared", v1alpha1.PoolModeShared, t0.Add(time.Hour))
	for _, p := range []*v1alpha1.RdmaPool{older, younger} {
		p.Spec.ExtendedResourceName = ptr.To("rdma/hca_shared_devices_a")
		h.putPool(p)
	}
	for _, name := range []string{"all-shared", "ib-shared"} {
		if err := h.sync(name); err != nil {
			t.Fatal(err)
		}
	}
	if got := h.class("ib-shared").Spec.ExtendedResourceName; ptr.Deref(got, "") != "rdma/hca_shared_devices_a" {
		t.Errorf("the older pool lost the name: %v", got)
	}
	if got := h.class("all-shared"); got == nil || got.Spec.ExtendedResourceName != nil {
		t.Errorf("the younger pool's class should exist without the name: %+v", got)
	}
	c := h.ready("all-shared")
	if c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ReasonExtendedResourceNameConflict || !strings.Contains(c.Message, "RdmaPool ib-shared") {
		t.Errorf("Ready %+v", c)
	}
	if c := h.ready("ib-shared"); c.Status != metav1.ConditionTrue {
		t.Errorf("older pool Ready %+v", c)
	}
	// The older pool goes away: the younger one gets the name.
	_ = h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "ib-shared", metav1.DeleteOptions{})
	if err := h.sync("ib-shared"); err != nil {
		t.Fatal(err)
	}
	if err := h.sync("all-shared"); err != nil {
		t.Fatal(err)
	}
	if got := h.class("all-shared").Spec.ExtendedResourceName; ptr.Deref(got, "") != "rdma/hca_shared_devices_a" {
		t.Errorf("the remaining pool did not get the name: %v", got)
	}
	if c := h.ready("all-shared"); c.Status != metav1.ConditionTrue {
		t.Errorf("Ready %+v", c)
	}
}

func TestSyncInvalidPools(t *testing.T) {
	tests := []struct {
		name        string
		mutate      func(*v1alpha1.RdmaPool)
		wantReason  string
		wantMessage string
	}{
		{"bad pattern", func(p *v1alpha1.RdmaPool) { p.Spec.Selectors.IfNames = []string{"ib["} },
			v1alpha1.ReasonInvalidSelector, `spec.selectors.ifNames[0]: Invalid value: "ib["`},
		{"bad CEL", func(p *v1alpha1.RdmaPool) { p.Spec.CEL = `device.attributes["rdma.dra.io"].port ==` },
			v1alpha1.ReasonInvalidSelector, "CEL selector: spec.cel: compilation failed"},
		{"CEL with an unknown field", func(p *v1alpha1.RdmaPool) { p.Spec.CEL = `device.vendor == "15b3"` },
			v1alpha1.ReasonInvalidSelector, "undefined field 'vendor'"},
		{"bad config", func(p *v1alpha1.RdmaPool) {
			p.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","gidIndex":300}`)}
		}, v1alpha1.ReasonInvalidConfig, `spec.config.gidIndex: Invalid value: "300"`},
		{"config of another kind", func(p *v1alpha1.RdmaPool) {
			p.Spec.Config = &runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)}
		}, v1alpha1.ReasonInvalidConfig, `apiVersion "v1" is not supported`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			pool := newPool("p", v1alpha1.PoolModeExclusive, t0)
			h.putPool(pool)
			if err := h.sync("p"); err != nil {
				t.Fatal(err)
			}
			good := h.class("p").Spec.Selectors[0].CEL.Expression
			pool = h.pool("p")
			tt.mutate(pool)
			pool.Generation = 2
			h.putPool(pool)
			if err := h.sync("p"); err != nil {
				t.Fatal(err)
			}
			c := h.ready("p")
			if c.Status != metav1.ConditionFalse || c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("Ready %+v, want %s with %q", c, tt.wantReason, tt.wantMessage)
			}
			if !strings.Contains(c.Message, "keeps its last valid spec") {
				t.Errorf("message does not say the class is kept: %q", c.Message)
			}
			if got := h.class("p").Spec.Selectors[0].CEL.Expression; got != good {
				t.Errorf("class changed to %q", got)
			}
		})
	}
}

// usageSlices are two dgx-h100 nodes plus an outdated slice generation and another
// driver's slice, which must not count.
func usageObjects(t *testing.T) []runtime.Object {
	var objs []runtime.Object
	for _, node := range []string{"node-a", "node-b"} {
		for _, s := range profileSlices(t, "dgx-h100", node, false) {
			objs = append(objs, s)
		}
	}
	stale := profileSlices(t, "dgx-h100", "node-a", false)[0].DeepCopy()
	stale.Name = "stale"
	stale.Spec.Pool.Generation = 0
	other := profileSlices(t, "dgx-h100", "node-c", false)[0].DeepCopy()
	other.Name = "other-driver"
	other.Spec.Driver = "gpu.example.com"
	objs = append(objs, stale, other)

	result := func(device string, shares int64) resourceapi.DeviceRequestAllocationResult {
		r := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: "rdma.dra.io", Pool: "node-a-rdma", Device: device}
		if shares > 0 {
			r.ConsumedCapacity = map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: *apiresource.NewQuantity(shares, apiresource.DecimalSI)}
		}
		return r
	}
	claim := func(name string, results ...resourceapi.DeviceRequestAllocationResult) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: results}}}}
	}
	gpu := result("gpu-0", 0)
	gpu.Driver = "gpu.example.com"
	objs = append(objs,
		claim("three-shares", result("mlx5-0-p1-shared", 3)),
		claim("one-share-without-capacity", result("mlx5-2-p1-shared", 0)),
		claim("whole-port", result("mlx5-1-p1", 0), gpu),
		claim("roce-share", result("mlx5-8-p1-shared", 1)),
		&resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "pending", Namespace: "default"}},
	)
	return objs
}

func TestSyncStatusCounts(t *testing.T) {
	h := newHarness(t, usageObjects(t)...)
	ibShared := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	ibShared.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	ibExclusive := newPool("ib-exclusive", v1alpha1.PoolModeExclusive, t0)
	ibExclusive.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	roce := newPool("roce-shared", v1alpha1.PoolModeShared, t0)
	roce.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"ETH"}
	for _, p := range []*v1alpha1.RdmaPool{ibShared, ibExclusive, roce} {
		h.putPool(p)
		if err := h.sync(p.Name); err != nil {
			t.Fatal(err)
		}
	}
	perPort := int64(16) // the default shares per port
	tests := []struct {
		pool string
		want v1alpha1.RdmaPoolStatus
	}{
		// 16 IB ports on two nodes. mlx5-0 on node-a has 3 shares out, mlx5-2 one (a
		// result without consumed capacity counts as one share), and mlx5-1 is
		// allocated whole, so its shares are not free.
		{"ib-shared", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, Shares: 16 * perPort, AllocatedPorts: 2, AllocatedShares: 4,
			Allocated: 4, Free: 16*perPort - 4 - perPort}},
		// Whole ports: mlx5-1 is allocated; mlx5-0 and mlx5-2 have shares out.
		{"ib-exclusive", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, AllocatedPorts: 1, Allocated: 1, Free: 13}},
		{"roce-shared", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 4, Shares: 4 * perPort, AllocatedPorts: 1, AllocatedShares: 1,
			Allocated: 1, Free: 4*perPort - 1}},
	}
	for _, tt := range tests {
		t.Run(tt.pool, func(t *testing.T) {
			got := h.pool(tt.pool).Status
			got.Conditions, got.ObservedGeneration, got.DeviceClassName = nil, 0, ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			free := poolGauge(t, h.c.metrics, metricFree, tt.pool, string(h.pool(tt.pool).Spec.Mode))
			if int64(free) != tt.want.Free {
				t.Errorf("metric free %v, want %d", free, tt.want.Free)
			}
		})
	}
}

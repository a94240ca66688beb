package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// legacyClaim is a claim allocated shares of legacy devices; a result of 0 shares has
// no consumed capacity.
func legacyClaim(name string, results ...legacyResult) *resourceapi.ResourceClaim {
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{}}}
	for _, r := range results {
		res := resourceapi.DeviceRequestAllocationResult{Request: "r", Driver: devicemodel.DefaultDriverName,
			Pool: devicemodel.DefaultPoolName(r.node, devicemodel.DefaultDriverName), Device: v1alpha1.LegacyDeviceName(r.pool)}
		if r.shares > 0 {
			res.ConsumedCapacity = map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: *apiresource.NewQuantity(r.shares, apiresource.DecimalSI)}
		}
		c.Status.Allocation.Devices.Results = append(c.Status.Allocation.Devices.Results, res)
	}
	return c
}

// legacyResult is an allocation of shares of the device of a legacy pool on a node.
type legacyResult struct {
	node, pool string
	shares     int64
}

// TestSyncLegacyStatusCounts: a legacy pool counts the ports its devices stand for and
// their shares; the other pools' counts stay what TestSyncStatusCounts says, legacy
// devices and claims beside them.
func TestSyncLegacyStatusCounts(t *testing.T) {
	objs := append(usageObjects(t),
		legacySlice("node-a", legacyDevice("hca-a", 8, 1000), legacyDevice("hca-b", 2, 10)),
		legacySlice("node-b", legacyDevice("hca-a", 4, 1000)),
		legacyClaim("pod-a-one-share", legacyResult{"node-a", "hca-a", 1}),
		legacyClaim("pod-a-three-shares", legacyResult{"node-a", "hca-a", 3}),
		legacyClaim("pod-b-no-capacity", legacyResult{"node-a", "hca-b", 0}),
	)
	h := newHarness(t, objs...)
	ibShared := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	ibShared.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	ibExclusive := newPool("ib-exclusive", v1alpha1.PoolModeExclusive, t0)
	ibExclusive.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	withCEL := newPool("hca-b", v1alpha1.PoolModeLegacy, t0)
	withCEL.Spec.CEL = `device.attributes["rdma.dra.io"].ports >= 2`
	withCEL.Spec.ExtendedResourceName = ptr.To("rdma/hca_shared_devices_b")
	pools := []*v1alpha1.RdmaPool{ibShared, ibExclusive, newPool("hca-a", v1alpha1.PoolModeLegacy, t0), withCEL,
		newPool("hca-c", v1alpha1.PoolModeLegacy, t0)}
	for _, p := range pools {
		h.putPool(p)
		if err := h.sync(p.Name); err != nil {
			t.Fatal(err)
		}
	}
	perPort := int64(16)
	tests := []struct {
		pool string
		want v1alpha1.RdmaPoolStatus
	}{
		// 8 ports on node-a, 4 on node-b; the node-a device has 4 shares out to two
		// claims, so its 8 ports are allocated.
		{"hca-a", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 12, Shares: 2000, AllocatedPorts: 8, AllocatedShares: 4,
			Allocated: 4, Free: 2000 - 4}},
		// A result without consumed capacity is one share.
		{"hca-b", v1alpha1.RdmaPoolStatus{Nodes: 1, Ports: 2, Shares: 10, AllocatedPorts: 2, AllocatedShares: 1,
			Allocated: 1, Free: 9}},
		// No node publishes its device (its node configuration entry selects nothing).
		{"hca-c", v1alpha1.RdmaPoolStatus{}},
		// As in TestSyncStatusCounts: legacy devices count in legacy pools only.
		{"ib-shared", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, Shares: 16 * perPort, AllocatedPorts: 2, AllocatedShares: 4,
			Allocated: 4, Free: 16*perPort - 4 - perPort}},
		{"ib-exclusive", v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, AllocatedPorts: 1, Allocated: 1, Free: 13}},
	}
	for _, tt := range tests {
		t.Run(tt.pool, func(t *testing.T) {
			if c := h.ready(tt.pool); c.Status != metav1.ConditionTrue {
				t.Fatalf("Ready %+v", c)
			}
			got := h.pool(tt.pool).Status
			got.Conditions, got.ObservedGeneration, got.DeviceClassName = nil, 0, ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if free := poolGauge(t, h.c.metrics, metricFree, tt.pool, string(h.pool(tt.pool).Spec.Mode)); int64(free) != tt.want.Free {
				t.Errorf("metric free %v, want %d", free, tt.want.Free)
			}
		})
	}
	if got := ptr.Deref(h.class("hca-b").Spec.ExtendedResourceName, ""); got != "rdma/hca_shared_devices_b" {
		t.Errorf("extendedResourceName of the legacy pool's class %q", got)
	}
}

// TestLegacyEventsEnqueueTheirPool: an allocation or a republished device of a legacy
// pool recounts that pool alone.
func TestLegacyEventsEnqueueTheirPool(t *testing.T) {
	objs := append(usageObjects(t), legacySlice("node-a", legacyDevice("hca-a", 8, 1000), legacyDevice("hca-b", 2, 10)))
	h := newHarness(t, objs...)
	ibShared := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	ibShared.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	for _, p := range []*v1alpha1.RdmaPool{ibShared, newPool("hca-a", v1alpha1.PoolModeLegacy, t0), newPool("hca-b", v1alpha1.PoolModeLegacy, t0)} {
		h.putPool(p)
		if err := h.sync(p.Name); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name  string
		event func() sets.Set[string]
		want  []string
	}{
		{"a pod of hca-a", func() sets.Set[string] {
			return h.c.index.updateClaim(h.ctx, "default/new", legacyClaim("new", legacyResult{"node-a", "hca-a", 1}))
		}, []string{"hca-a"}},
		{"hca-b's device stands for more ports", func() sets.Set[string] {
			return h.c.index.updateSlice(h.ctx, "legacy-rdma.dra.io-node-a", legacySlice("node-a", legacyDevice("hca-a", 8, 1000), legacyDevice("hca-b", 4, 10)))
		}, []string{"hca-b"}},
		{"the slice is gone", func() sets.Set[string] {
			return h.c.index.updateSlice(h.ctx, "legacy-rdma.dra.io-node-a", nil)
		}, []string{"hca-a", "hca-b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sets.List(tt.event()); !cmp.Equal(got, tt.want) {
				t.Errorf("enqueues %v, want %v", got, tt.want)
			}
		})
	}
}

// TestLegacyPoolsOnTheDeviceModel syncs legacy pools on the slices the kubelet plugin
// builds for two dgx-h100 nodes (8 InfiniBand and 2 RoCE ports each) whose node
// configuration has a legacy resource for each link layer: each class selects its own
// device on each node, and the status counts the ports the devices stand for.
func TestLegacyPoolsOnTheDeviceModel(t *testing.T) {
	resources := []nodeconfig.LegacyResource{
		{Name: "hca-ib", MaxPods: 100, Selectors: nodeconfig.Selector{LinkTypes: []string{"IB"}}},
		{Name: "hca-roce", MaxPods: 4, Selectors: nodeconfig.Selector{LinkTypes: []string{"ETH"}}},
	}
	var objs []runtime.Object
	for _, node := range []string{"node-a", "node-b"} {
		for _, s := range legacyResourceSlices(t, "dgx-h100", node, resources...) {
			objs = append(objs, s)
		}
	}
	objs = append(objs, legacyClaim("pod", legacyResult{"node-b", "hca-roce", 1}))
	h := newHarness(t, objs...)
	ibShared := newPool("ib-shared", v1alpha1.PoolModeShared, t0)
	ibShared.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"IB"}
	for _, p := range []*v1alpha1.RdmaPool{ibShared, newPool("hca-ib", v1alpha1.PoolModeLegacy, t0), newPool("hca-roce", v1alpha1.PoolModeLegacy, t0)} {
		h.putPool(p)
		if err := h.sync(p.Name); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		pool        string
		wantDevices []string
		want        v1alpha1.RdmaPoolStatus
	}{
		{"hca-ib", []string{"node-a/legacy-hca-ib", "node-b/legacy-hca-ib"},
			v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, Shares: 200, Free: 200}},
		{"hca-roce", []string{"node-a/legacy-hca-roce", "node-b/legacy-hca-roce"},
			v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 4, Shares: 8, AllocatedPorts: 2, AllocatedShares: 1, Allocated: 1, Free: 7}},
		// Legacy devices beside the port devices change nothing of a shared pool.
		{"ib-shared", nil, v1alpha1.RdmaPoolStatus{Nodes: 2, Ports: 16, Shares: 16 * 16, Free: 16 * 16}},
	}
	for _, tt := range tests {
		t.Run(tt.pool, func(t *testing.T) {
			got := h.pool(tt.pool).Status
			got.Conditions, got.ObservedGeneration, got.DeviceClassName = nil, 0, ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if tt.wantDevices == nil {
				return
			}
			prog, err := CompileSelector(h.class(tt.pool).Spec.Selectors[0].CEL.Expression)
			if err != nil {
				t.Fatal(err)
			}
			var selected []string
			for _, o := range objs {
				s, ok := o.(*resourceapi.ResourceSlice)
				if !ok {
					continue
				}
				for i := range s.Spec.Devices {
					d := &s.Spec.Devices[i]
					match(t, prog, celDevice(s.Spec.Driver, d), *s.Spec.NodeName+"/"+d.Name, &selected)
				}
			}
			if !cmp.Equal(selected, tt.wantDevices) {
				t.Errorf("class selects %v, want %v", selected, tt.wantDevices)
			}
		})
	}
}

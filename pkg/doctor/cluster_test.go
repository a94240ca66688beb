package doctor

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kversioninfo "k8s.io/apimachinery/pkg/version"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
)

// fakeCluster is an API server of version server serving resource.k8s.io in versions,
// with a node "node-a" whose kubelet reports kubelet.
type fakeCluster struct {
	server, kubelet string
	versions        []string
	cs              *fake.Clientset
}

func newFakeCluster(server, kubelet string, versions ...string) *fakeCluster {
	c := &fakeCluster{server: server, kubelet: kubelet, versions: versions}
	c.cs = fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubelet}},
	})
	c.cs.Resources = []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "nodes"}}}}
	for _, v := range versions {
		c.cs.Resources = append(c.cs.Resources, &metav1.APIResourceList{
			GroupVersion: resourceapi.GroupName + "/" + v, APIResources: []metav1.APIResource{{Name: "resourceslices"}}})
	}
	c.cs.Discovery().(*fakediscovery.FakeDiscovery).FakedServerVersion = &kversioninfo.Info{GitVersion: server}
	// A dry run stores nothing and answers the object as the API server would keep it;
	// this one keeps every field (the fake's tracker knows no generateName).
	c.onSliceCreate(func(s *resourceapi.ResourceSlice) (kruntime.Object, error) { return s, nil })
	return c
}

// onSliceCreate makes a dry-run create of a ResourceSlice answer what react returns for
// it; any other create fails: the doctor must never store a slice.
func (c *fakeCluster) onSliceCreate(react func(*resourceapi.ResourceSlice) (kruntime.Object, error)) {
	c.cs.PrependReactor("create", "resourceslices", func(a k8stesting.Action) (bool, kruntime.Object, error) {
		create := a.(k8stesting.CreateActionImpl)
		if !slices.Contains(create.GetCreateOptions().DryRun, metav1.DryRunAll) {
			return true, nil, errors.New("a create that is not a dry run")
		}
		s := create.GetObject().(*resourceapi.ResourceSlice)
		obj, err := react(s.DeepCopy())
		return true, obj, err
	})
}

// dropPartitionable answers a create as an API server without DRAPartitionableDevices
// and DRAConsumableCapacity does: the fields of those features are gone.
func dropPartitionable(s *resourceapi.ResourceSlice) (kruntime.Object, error) {
	s.Spec.SharedCounters = nil
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		d.ConsumesCounters, d.AllowMultipleAllocations = nil, nil
		for name, c := range d.Capacity {
			c.RequestPolicy = nil
			d.Capacity[name] = c
		}
	}
	return s, nil
}

func TestClusterChecks(t *testing.T) {
	healthy := func() *fakeCluster { return newFakeCluster("v1.37.1", "v1.37.1", "v1", "v1beta2") }
	type want struct {
		status Status
		found  []string
		fix    []string
	}
	tests := []struct {
		name    string
		cluster func() *fakeCluster
		node    string
		want    map[string]want
	}{
		{name: "healthy", cluster: healthy, want: map[string]want{
			CheckKubernetesVersion: {status: OK, found: []string{"API server v1.37.1"}},
			CheckDRAAPI:            {status: OK, found: []string{"resource.k8s.io/v1 served (versions v1, v1beta2)"}},
			CheckKubeletVersion:    {status: OK, found: []string{"kubelet v1.37.1 on node node-a"}},
			CheckDeviceModel:       {status: OK, found: []string{"partitionable", "20 devices"}},
		}},
		{name: "control plane too old", cluster: func() *fakeCluster { return newFakeCluster("v1.33.4", "v1.33.4", "v1beta2", "v1beta1") }, want: map[string]want{
			CheckKubernetesVersion: {status: Fail, found: []string{"v1.33.4"}, fix: []string{"1.34 or newer", "resource.k8s.io/v1"}},
			CheckDRAAPI:            {status: Fail, found: []string{"serves only v1beta1, v1beta2"}, fix: []string{"--runtime-config"}},
			CheckKubeletVersion:    {status: Fail, found: []string{"kubelet v1.33.4"}, fix: []string{"Upgrade the node"}},
		}},
		{name: "DRA off", cluster: func() *fakeCluster { return newFakeCluster("v1.35.0", "v1.35.0") }, want: map[string]want{
			CheckDRAAPI: {status: Fail, found: []string{"resource.k8s.io is not served"}, fix: []string{"--runtime-config"}},
		}},
		{name: "kubelet newer than the API server", cluster: func() *fakeCluster { return newFakeCluster("v1.36.2", "v1.37.0", "v1") }, want: map[string]want{
			CheckKubeletVersion: {status: Fail, found: []string{"newer than the API server"}, fix: []string{"control plane first"}},
		}},
		{name: "kubelet older within the skew", cluster: func() *fakeCluster { return newFakeCluster("v1.37.1", "v1.35.3", "v1") }, want: map[string]want{
			CheckKubeletVersion: {status: OK, found: []string{"kubelet v1.35.3"}},
		}},
		{name: "unknown node", cluster: healthy, node: "node-b", want: map[string]want{
			CheckKubeletVersion: {status: Fail, found: []string{"node node-b", "not found"}, fix: []string{"--node"}},
		}},
		{name: "partitionable fields dropped", cluster: func() *fakeCluster {
			c := healthy()
			c.onSliceCreate(dropPartitionable)
			return c
		}, want: map[string]want{
			CheckDeviceModel: {status: Warn,
				found: []string{"legacy", "spec.sharedCounters (DRAPartitionableDevices)", "devices[].allowMultipleAllocations (DRAConsumableCapacity)", "devices[].consumesCounters"},
				fix:   []string{"DRAPartitionableDevices and DRAConsumableCapacity", "1.36"}},
		}},
		{name: "no permission for the dry run", cluster: func() *fakeCluster {
			c := healthy()
			c.onSliceCreate(func(*resourceapi.ResourceSlice) (kruntime.Object, error) {
				return nil, apierrors.NewForbidden(schema.GroupResource{Group: resourceapi.GroupName, Resource: "resourceslices"}, "", errors.New("no"))
			})
			return c
		}, want: map[string]want{
			CheckDeviceModel: {status: Skip, found: []string{"dry-run create", "refused", "forbidden"}},
		}},
		{name: "dry run refused otherwise", cluster: func() *fakeCluster {
			c := healthy()
			c.onSliceCreate(func(*resourceapi.ResourceSlice) (kruntime.Object, error) {
				return nil, apierrors.NewInvalid(schema.GroupKind{Group: resourceapi.GroupName, Kind: "ResourceSlice"}, "x", nil)
			})
			return c
		}, want: map[string]want{
			CheckDeviceModel: {status: Warn, found: []string{"refused"}, fix: []string{"cluster admin"}},
		}},
		{name: "API server unreachable", cluster: func() *fakeCluster {
			c := healthy()
			c.cs.PrependReactor("get", "version", func(k8stesting.Action) (bool, kruntime.Object, error) {
				return true, nil, errors.New("dial tcp 10.0.0.1:6443: connect: connection refused")
			})
			return c
		}, want: map[string]want{
			CheckKubernetesVersion: {status: Fail, found: []string{"connection refused"}, fix: []string{"--kubeconfig"}},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, "dgx-h100", nil)
			node := tc.node
			if node == "" {
				node = "node-a"
			}
			f.h.Cluster = &Cluster{Client: tc.cluster().cs, Node: node}
			got := f.run()
			for check, w := range tc.want {
				r, ok := got[check]
				if !ok {
					t.Errorf("no %s result", check)
					continue
				}
				if r.Status != w.status {
					t.Errorf("%s: %s, want %s: %s (fix: %s)", check, r.Status, w.status, r.Found, r.Fix)
				}
				for _, s := range w.found {
					if !strings.Contains(r.Found, s) {
						t.Errorf("%s found %q, want it to contain %q", check, r.Found, s)
					}
				}
				for _, s := range w.fix {
					if !strings.Contains(r.Fix, s) {
						t.Errorf("%s fix %q, want it to contain %q", check, r.Fix, s)
					}
				}
				if (w.status == OK || w.status == Skip) && r.Fix != "" {
					t.Errorf("%s: %s with a fix %q", check, r.Status, r.Fix)
				}
			}
		})
	}
}

// TestClusterChecksOrder: with a cluster the four checks come after the runtime's, the
// ibdev2netdev listing stays last; without, there are none, or one SKIP in their place
// with ClusterSkipped.
func TestClusterChecksOrder(t *testing.T) {
	f := newFixture(t, "dgx-h100", nil)
	_, ctx := ktesting.NewTestContext(t)
	without := Run(ctx, f.h)
	f.h.Cluster = &Cluster{Client: newFakeCluster("v1.37.1", "v1.37.1", "v1").cs, Node: "node-a"}
	with := Run(ctx, f.h)
	if len(with) != len(without)+4 {
		t.Fatalf("%d results with a cluster, %d without; want 4 more", len(with), len(without))
	}
	var names []string
	for _, r := range with[len(without)-1:] {
		names = append(names, r.Check)
	}
	want := []string{CheckKubernetesVersion, CheckDRAAPI, CheckKubeletVersion, CheckDeviceModel, CheckIBDev2Netdev}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Errorf("last checks %v, want %v", names, want)
	}
	f.h.Cluster, f.h.ClusterSkipped = nil, "not checked: why"
	skipped := Run(ctx, f.h)
	if n := len(skipped); n != len(without)+1 || !reflect.DeepEqual(skipped[n-2], Result{Check: CheckCluster, Status: Skip, Found: "not checked: why"}) || skipped[n-1].Check != CheckIBDev2Netdev {
		t.Errorf("with ClusterSkipped, the last two results are %+v, want the cluster SKIP, then ibdev2netdev", skipped[max(0, n-2):])
	}
}

package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// railsConfig is the seed pod's shared-dev-plugin config (docs/migration.md) for the
// dgx-h100 mock node: a unit of a is its 8 InfiniBand rails, of b its 2 RoCE ports. The
// CLI's tests read the same file.
var railsConfig = func() string {
	data, err := os.ReadFile(filepath.Join("testdata", "seed", "rails.json"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// clusterNodeObject is a node whose device plugin advertises capacity; allocatable is
// the same unless alloc names a resource with another value.
func clusterNodeObject(name string, labels map[string]string, capacity map[string]int64, alloc map[string]int64) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{}, Allocatable: corev1.ResourceList{}}}
	for r, v := range capacity {
		n.Status.Capacity[corev1.ResourceName(r)] = *resource.NewQuantity(v, resource.DecimalSI)
		a := v
		if x, ok := alloc[r]; ok {
			a = x
		}
		n.Status.Allocatable[corev1.ResourceName(r)] = *resource.NewQuantity(a, resource.DecimalSI)
	}
	return n
}

// nodeSlices are the ResourceSlices the kubelet plugin publishes for a mock node of
// profile with node configuration cfg, at pool generation gen.
func nodeSlices(t *testing.T, node, profile string, cfg nodeconfig.Config, gen int64) []runtime.Object {
	t.Helper()
	_, inv := mockNode(t, profile)
	model, err := devicemodel.Build(inv, devicemodel.Options{NodeName: node, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for poolName, pool := range model.Resources.Pools {
		for i, s := range pool.Slices {
			out = append(out, &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d-%d", node, gen, i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: model.DriverName, NodeName: ptr.To(node),
					Pool:    resourceapi.ResourcePool{Name: poolName, Generation: gen, ResourceSliceCount: int64(len(pool.Slices))},
					Devices: s.Devices, SharedCounters: s.SharedCounters},
			})
		}
	}
	return out
}

// TestClusterPreview compares, node by node, a fake cluster's device plugin capacity
// with the devices the driver publishes for nodes built from mock profiles.
func TestClusterPreview(t *testing.T) {
	rails, err := FromSharedDevicePlugin([]byte(railsConfig), Options{})
	if err != nil {
		t.Fatal(err)
	}
	migrated, err := NodeConfigFor(rails, nil)
	if err != nil {
		t.Fatal(err)
	}
	// withLegacy is the migrated node configuration with the entries changed by edit,
	// as a node whose configuration drifted from what migrate wrote.
	withLegacy := func(edit func([]nodeconfig.LegacyResource)) nodeconfig.Config {
		lrs := slices.Clone(rails.LegacyResources)
		for i := range lrs {
			lrs[i].Selectors.LinkTypes = slices.Clone(lrs[i].Selectors.LinkTypes)
		}
		edit(lrs)
		c, err := NodeConfigFor(&Result{LegacyResources: lrs}, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	fewerPods := withLegacy(func(l []nodeconfig.LegacyResource) { l[0].MaxPods = 10 })
	fourRails := withLegacy(func(l []nodeconfig.LegacyResource) {
		l[0].Selectors = nodeconfig.Selector{IBDevs: []string{"mlx5_[0-3]"}}
	})
	allPorts := withLegacy(func(l []nodeconfig.LegacyResource) { l[0].Selectors = nodeconfig.Selector{Vendors: []string{"15b3"}} })
	both := map[string]int64{"rdma/rdma_shared_device_a": 63, "rdma/rdma_shared_device_b": 63}
	onlyA := map[string]int64{"rdma/rdma_shared_device_a": 63}

	vfs, err := FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourcePrefix":"nvidia.com","resourceName":"vfs","selectors":{"vendors":["15b3"],"devices":["101e"],"isRdma":true}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		res      *Result
		objects  []runtime.Object
		selector string
		want     []string // "node resource: plugin | pool | verdict"
	}{
		{name: "the unit and the ports kept", res: rails,
			objects: append(nodeSlices(t, "dgx-1", "dgx-h100", migrated, 1), clusterNodeObject("dgx-1", nil, both, nil)),
			want: []string{
				"dgx-1 rdma/rdma_shared_device_a: 63 units of 8 ports | 63 units of 8 ports | same units, of as many ports",
				"dgx-1 rdma/rdma_shared_device_b: 63 units of 2 ports | 63 units of 2 ports | same units, of as many ports",
			}},
		{name: "unhealthy devices and an older generation", res: rails,
			objects: append(append(nodeSlices(t, "dgx-1", "dgx-h100", fewerPods, 1), nodeSlices(t, "dgx-1", "dgx-h100", migrated, 2)...),
				clusterNodeObject("dgx-1", nil, both, map[string]int64{"rdma/rdma_shared_device_a": 0})),
			want: []string{
				"dgx-1 rdma/rdma_shared_device_a: 63 units (0 allocatable) of 8 ports | 63 units of 8 ports | same units, of as many ports",
				"dgx-1 rdma/rdma_shared_device_b: 63 units of 2 ports | 63 units of 2 ports | same units, of as many ports",
			}},
		{name: "fewer pods and fewer ports are narrower, more are wider", res: rails,
			objects: append(append(append(nodeSlices(t, "dgx-1", "dgx-h100", fewerPods, 1), nodeSlices(t, "dgx-2", "dgx-h100", fourRails, 1)...),
				nodeSlices(t, "dgx-3", "dgx-h100", allPorts, 1)...),
				clusterNodeObject("dgx-1", nil, both, nil), clusterNodeObject("dgx-2", nil, onlyA, nil), clusterNodeObject("dgx-3", nil, map[string]int64{"rdma/rdma_shared_device_a": 8}, nil)),
			want: []string{
				"dgx-1 rdma/rdma_shared_device_a: 63 units of 8 ports | 10 units of 8 ports | narrower: 10 pods may hold it where the device plugin allowed 63 (maxPods against rdmaHcaMax)",
				"dgx-1 rdma/rdma_shared_device_b: 63 units of 2 ports | 63 units of 2 ports | same units, of as many ports",
				"dgx-2 rdma/rdma_shared_device_a: 63 units of 8 ports | 63 units of 4 ports | narrower: a unit is 4 ports where the entry's selectors match 8",
				// The device plugin does not advertise b on dgx-2: the pool would serve it there.
				"dgx-2 rdma/rdma_shared_device_b: none | 63 units of 2 ports | WIDER: the device plugin advertises no rdma/rdma_shared_device_b here and the pool would serve 63 units of 2 ports",
				"dgx-3 rdma/rdma_shared_device_a: 8 units of 8 ports | 63 units of 10 ports | WIDER: 63 pods may hold it where the device plugin allowed 8 (maxPods against rdmaHcaMax); a unit is 10 ports where the entry's selectors match 8",
				"dgx-3 rdma/rdma_shared_device_b: none | 63 units of 2 ports | WIDER: the device plugin advertises no rdma/rdma_shared_device_b here and the pool would serve 63 units of 2 ports",
			}},
		{name: "missing slices, missing legacy devices, unrelated nodes", res: rails,
			objects: append(nodeSlices(t, "dgx-2", "dgx-h100", nodeconfig.Config{}, 1),
				clusterNodeObject("dgx-1", nil, both, nil), clusterNodeObject("dgx-2", nil, onlyA, nil), clusterNodeObject("cpu-1", nil, nil, nil)),
			want: []string{
				"dgx-1 rdma/rdma_shared_device_a: 63 units | none | MISSING: the driver publishes no ResourceSlice for this node (is its kubelet plugin running there?)",
				"dgx-1 rdma/rdma_shared_device_b: 63 units | none | MISSING: the driver publishes no ResourceSlice for this node (is its kubelet plugin running there?)",
				"dgx-2 rdma/rdma_shared_device_a: 63 units of 8 ports | none | MISSING: no device legacy-rdma-shared-device-a in the node's ResourceSlices (is the entry in the node configuration's legacyResources?)",
				"dgx-2 rdma/rdma_shared_device_b: none | none | not here",
			}},
		{name: "a node selector", res: rails, selector: "rdma.dra.io/stack=shadow",
			objects: append(nodeSlices(t, "dgx-2", "dgx-h100", migrated, 1),
				clusterNodeObject("dgx-1", map[string]string{"rdma.dra.io/stack": "device-plugin"}, both, nil),
				clusterNodeObject("dgx-2", map[string]string{"rdma.dra.io/stack": "shadow"}, both, nil)),
			want: []string{
				"dgx-2 rdma/rdma_shared_device_a: 63 units of 8 ports | 63 units of 8 ports | same units, of as many ports",
				"dgx-2 rdma/rdma_shared_device_b: 63 units of 2 ports | 63 units of 2 ports | same units, of as many ports",
			}},
		{name: "SR-IOV: one unit per device", res: vfs,
			objects: append(append(nodeSlices(t, "sriov-1", "sriov", nodeconfig.Config{}, 1), nodeSlices(t, "sriov-2", "sriov", nodeconfig.Config{}, 1)...),
				clusterNodeObject("sriov-1", nil, map[string]int64{"nvidia.com/vfs": 16}, nil), clusterNodeObject("sriov-2", nil, map[string]int64{"nvidia.com/vfs": 12}, nil),
				clusterNodeObject("sriov-3", nil, map[string]int64{"nvidia.com/vfs": 16}, nil)),
			want: []string{
				"sriov-1 nvidia.com/vfs: 16 units | 16 devices | same units",
				"sriov-2 nvidia.com/vfs: 12 units | 16 devices | WIDER: the pool would serve 16 devices where the device plugin advertised 12",
				"sriov-3 nvidia.com/vfs: 16 units | 0 devices | MISSING: the driver publishes no ResourceSlice for this node (is its kubelet plugin running there?)",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kube := fake.NewClientset(tt.objects...)
			findings, err := ClusterPreview(context.Background(), tt.res, kube, ClusterOptions{NodeSelector: tt.selector})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range findings {
				got = append(got, fmt.Sprintf("%s %s: %s | %s | %s", f.Node, f.Resource, f.PluginSide, f.PoolSide, f.Verdict()))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
	if _, err := ClusterPreview(context.Background(), rails, fake.NewClientset(), ClusterOptions{NodeSelector: "a in (b"}); err == nil ||
		!strings.Contains(err.Error(), `node selector "a in (b"`) {
		t.Errorf("a bad selector: %v", err)
	}
}

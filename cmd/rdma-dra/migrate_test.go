package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// railsJSON is the seed pod's shared-dev-plugin config for the dgx-h100 mock node: a is
// its 8 InfiniBand rails, b its 2 RoCE ports (pkg/migrate's testdata, shared with its tests).
var railsJSON = func() string {
	data, err := os.ReadFile(filepath.Join("..", "..", "pkg", "migrate", "testdata", "seed", "rails.json"))
	if err != nil {
		panic(err)
	}
	return string(data)
}()

// fakeCluster makes migrate's clients fake ones holding objects.
func fakeCluster(t *testing.T, objects ...runtime.Object) {
	t.Helper()
	saved := newKubeClients
	t.Cleanup(func() { newKubeClients = saved })
	newKubeClients = func(string) (*kubeClients, error) {
		dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{deviceClassesGVR: "DeviceClassList", rdmaPoolsGVR: "RdmaPoolList"})
		return &kubeClients{dynamic: dyn, kube: fake.NewClientset(objects...), source: "the fake cluster"}, nil
	}
}

// clusterOf returns a node object advertising capacity and the ResourceSlices the driver
// publishes for it: a mock node of profile with the migrated node configuration of the
// shared-dev-plugin config input.
func clusterOf(t *testing.T, node, profile, input string, capacity map[string]int64) []runtime.Object {
	t.Helper()
	res, err := migrate.FromSharedDevicePlugin([]byte(input), migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := migrate.NodeConfigFor(res, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := writeProfile(t, profile, "Y")
	inv, err := discovery.New(discovery.Options{SysfsRoot: root}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	model, err := devicemodel.Build(inv, devicemodel.Options{NodeName: node, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, Labels: map[string]string{"rdma.dra.io/stack": "shadow"}},
		Status: corev1.NodeStatus{Capacity: corev1.ResourceList{}, Allocatable: corev1.ResourceList{}}}
	for r, v := range capacity {
		n.Status.Capacity[corev1.ResourceName(r)] = *resource.NewQuantity(v, resource.DecimalSI)
		n.Status.Allocatable[corev1.ResourceName(r)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	objects := []runtime.Object{n}
	for poolName, pool := range model.Resources.Pools {
		for i, s := range pool.Slices {
			objects = append(objects, &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", node, i)},
				Spec: resourceapi.ResourceSliceSpec{Driver: model.DriverName, NodeName: ptr.To(node), Devices: s.Devices, SharedCounters: s.SharedCounters,
					Pool: resourceapi.ResourcePool{Name: poolName, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))}}})
		}
	}
	return objects
}

// TestMigrateExitStatus runs migrate as main does: 0 when the pools are written, 3 when
// every problem is a widening a flag accepts, 2 for any other problem (which wins), in
// conversions and in dry runs against a node and a fake cluster.
func TestMigrateExitStatus(t *testing.T) {
	work := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(work, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rails := write("rails.json", railsJSON)
	zz := write("zz.json", `{"configList":[{"resourceName":"hca","rdmaHcaMax":100,"selectors":{"vendors":["zz"]}}]}`)
	zzAndZero := write("zz-zero.json", `{"configList":[{"resourceName":"hca","rdmaHcaMax":100,"selectors":{"vendors":["zz"]}},{"resourceName":"x","rdmaHcaMax":0,"devices":["ib0"]}]}`)
	trailing := write("trailing.json", "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"devices\": [\"ib0\"],}]}\n")
	bonded := write("bonded.json", `{"configList":[{"resourceName":"roce","rdmaHcaMax":4,"selectors":{"ifNames":["enp94s0f0np0","enp94s0f1np1"]}}]}`)
	pfAndVFs := write("pf.json", `{"resourceList":[{"resourceName":"pf","selectors":{"pciAddresses":["0000:3b:00.0","0000:3b:00.2"],"isRdma":true}}]}`)
	foreign := write("existing.yaml", "kind: DeviceClass\nmetadata: {name: rdma-shared-device-a}\nspec: {extendedResourceName: rdma/rdma_shared_device_a}\n")
	values := write("values.yaml", "# mine\nimage: {tag: v1}\nnodeConfig:\n  shares: 8\n")
	badValues := write("bad-values.yaml", "nodeConfig: [1]\n")
	valuesOut, nodeOut := filepath.Join(work, "values-out.yaml"), filepath.Join(work, "node-out.yaml")
	dgx := writeProfile(t, "dgx-h100", "Y")
	sriov := writeProfile(t, "sriov", "Y")
	mixed := writeProfile(t, "mixed-bond", "Y")

	same := clusterOf(t, "dgx-1", "dgx-h100", railsJSON, map[string]int64{"rdma/rdma_shared_device_a": 63, "rdma/rdma_shared_device_b": 63})
	fewerUnits := clusterOf(t, "dgx-2", "dgx-h100", railsJSON, map[string]int64{"rdma/rdma_shared_device_a": 8, "rdma/rdma_shared_device_b": 63})

	tests := []struct {
		name      string
		args      []string
		cluster   []runtime.Object
		code      int
		stdoutHas []string
		stderrHas []string
		files     map[string][]string // written files and what they hold
		noFiles   bool
	}{
		{name: "pools and their node side", args: []string{"--from-shared-dev-plugin", rails, "--chart-values", values, "--values-out", valuesOut, "--node-config-out", nodeOut},
			code: 0, stdoutHas: []string{"mode: legacy\n", "extendedResourceName: rdma/rdma_shared_device_a\n"},
			files: map[string][]string{
				valuesOut: {"# mine\n", "image: {tag: v1}\n", "  shares: 8\n", "  legacyResources:\n    - name: rdma-shared-device-a\n      maxPods: 63\n"},
				nodeOut:   {"version: v1alpha1\nshares: 8\nlegacyResources:\n  - name: rdma-shared-device-a\n    maxPods: 63\n"},
			}},
		{name: "chart values the node side cannot merge into", args: []string{"--from-shared-dev-plugin", rails, "--chart-values", badValues, "--values-out", valuesOut}, code: 2, noFiles: true,
			stderrHas: []string{"rdma-dra: " + badValues + ": chart values nodeConfig: want a mapping, got a list\n"}},
		{name: "legacy pools without their node side", args: []string{"--from-shared-dev-plugin", rails}, code: 2,
			stderrHas: []string{"error: pools rdma-shared-device-a, rdma-shared-device-b: a legacy pool selects nothing on a node whose configuration lacks its legacyResources entry; write them with --values-out FILE",
				"rdma-dra: 1 problem above; nothing written\n"}},
		{name: "only widenings", args: []string{"--from-shared-dev-plugin", zz, "--values-out", valuesOut}, code: 3, noFiles: true,
			stderrHas: []string{"(to accept, pass --allow-widening hca:vendors)\n", "each a widening that --allow-widening or --allow-wider accepts by name"}},
		{name: "a widening and another problem", args: []string{"--from-shared-dev-plugin", zzAndZero, "--values-out", valuesOut}, code: 2, noFiles: true,
			stderrHas: []string{"(to accept, pass --allow-widening hca:vendors)\n", "error: configList[1] (x): rdmaHcaMax: 0: the plugin advertises rdmaHcaMax units", "rdma-dra: 2 problems above; nothing written\n"}},
		{name: "a trailing comma", args: []string{"--from-shared-dev-plugin", trailing, "--values-out", valuesOut}, code: 2, noFiles: true,
			stderrHas: []string{"rdma-dra: " + trailing + ": parse input as JSON: line 1, column 75 (byte 74): invalid character '}' looking for beginning of object key string\n"}},
		{name: "a foreign class of the pool's name and resource", args: []string{"--from-shared-dev-plugin", rails, "--existing", foreign, "--values-out", valuesOut}, code: 2, noFiles: true,
			stderrHas: []string{"error: pool rdma-shared-device-a: metadata.name: a DeviceClass of that name serving rdma/rdma_shared_device_a exists (" + foreign + ") and the controller did not make it"}},

		{name: "node: the seed pod's rails", args: []string{"--from-shared-dev-plugin", rails, "--dry-run-against-node", dgx}, code: 0,
			stdoutHas: []string{"rdma/rdma_shared_device_a (pool rdma-shared-device-a): device plugin 8, pool 8: same ports\n",
				"rdma/rdma_shared_device_b (pool rdma-shared-device-b): device plugin 2, pool 2: same ports\n"}},
		{name: "node: wider", args: []string{"--from-sriov-device-plugin", pfAndVFs, "--dry-run-against-node", sriov}, code: 3,
			stdoutHas: []string{"intel.com/pf (pool pf): device plugin 1, pool 2: WIDER: only the pool selects mlx5_0/1\n"},
			stderrHas: []string{"error: intel.com/pf (pool pf) on " + sriov + ": the pool serves more than the device plugin did: only the pool selects mlx5_0/1 (to accept, pass --allow-wider intel.com/pf)\n"}},
		{name: "node: wider accepted", args: []string{"--from-sriov-device-plugin", pfAndVFs, "--dry-run-against-node", sriov, "--allow-wider", "intel.com/pf"}, code: 0,
			stderrHas: []string{"note: WIDER intel.com/pf (pool pf) on " + sriov + ": only the pool selects mlx5_0/1; accepted by --allow-wider intel.com/pf\n"}},
		{name: "node: --allow-wider with a typo", args: []string{"--from-sriov-device-plugin", pfAndVFs, "--dry-run-against-node", sriov, "--allow-wider", "intel.com/pff"}, code: 2,
			stderrHas: []string{"rdma-dra: --allow-wider intel.com/pff names no widening the dry run found; did you mean intel.com/pf?\n"}},
		{name: "node: a pool that serves nothing", args: []string{"--from-shared-dev-plugin", bonded, "--dry-run-against-node", mixed}, code: 2,
			stdoutHas: []string{"rdma/roce (pool roce): device plugin 2, pool 0: MISSING: the pool selects no port of this node, the device plugin selected mlx5_4/1, mlx5_5/1\n"}},
		{name: "--allow-wider without a dry run", args: []string{"--from-shared-dev-plugin", rails, "--allow-wider", "rdma/a"}, code: 2,
			stderrHas: []string{"rdma-dra: --allow-wider accepts what a dry run finds: give --dry-run-against-node or --dry-run-against-cluster\n"}},
		{name: "a dry run writes nothing", args: []string{"--from-shared-dev-plugin", rails, "--dry-run-against-node", dgx, "--values-out", valuesOut}, code: 2, noFiles: true,
			stderrHas: []string{"rdma-dra: a dry run writes nothing: --values-out and --node-config-out go with a run without --dry-run-against-*\n"}},

		{name: "cluster: the same", args: []string{"--from-shared-dev-plugin", rails, "--dry-run-against-cluster"}, cluster: same, code: 0,
			stdoutHas: []string{"NODE   RESOURCE                   POOL                  DEVICE PLUGIN        POOL SERVES          VERDICT\n" +
				"dgx-1  rdma/rdma_shared_device_a  rdma-shared-device-a  63 units of 8 ports  63 units of 8 ports  same units, of as many ports\n" +
				"dgx-1  rdma/rdma_shared_device_b  rdma-shared-device-b  63 units of 2 ports  63 units of 2 ports  same units, of as many ports\n"}},
		{name: "cluster: more pods than the plugin allowed", args: []string{"--from-shared-dev-plugin", rails, "--dry-run-against-cluster"}, cluster: append(same, fewerUnits...), code: 3,
			stdoutHas: []string{"WIDER: 63 pods may hold it where the device plugin allowed 8 (maxPods against rdmaHcaMax)\n"},
			stderrHas: []string{"error: rdma/rdma_shared_device_a (pool rdma-shared-device-a) on dgx-2: the pool serves more than the device plugin did: 63 pods may hold it where the device plugin allowed 8 (maxPods against rdmaHcaMax) (to accept, pass --allow-wider rdma/rdma_shared_device_a)\n"}},
		{name: "cluster: a node without the driver", args: []string{"--from-shared-dev-plugin", rails, "--dry-run-against-cluster", "--node-selector", "kubernetes.io/hostname=dgx-3"},
			cluster: []runtime.Object{&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "dgx-3", Labels: map[string]string{"kubernetes.io/hostname": "dgx-3"}},
				Status: corev1.NodeStatus{Capacity: corev1.ResourceList{"rdma/rdma_shared_device_a": resource.MustParse("63")}}}}, code: 2,
			stderrHas: []string{"error: rdma/rdma_shared_device_a (pool rdma-shared-device-a) on dgx-3: the driver publishes no ResourceSlice for this node (is its kubelet plugin running there?); pods asking for rdma/rdma_shared_device_a would no longer run there\n"}},
		{name: "cluster: --node-selector alone", args: []string{"--from-shared-dev-plugin", rails, "--node-selector", "a=b"}, code: 2,
			stderrHas: []string{"rdma-dra: --node-selector goes with --dry-run-against-cluster\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fakeCluster(t, tt.cluster...)
			for f := range tt.files {
				os.Remove(f)
			}
			os.Remove(valuesOut)
			stdout, stderr, code := runApp(t, "", append([]string{"migrate"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit status %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout)
				}
			}
			for _, s := range tt.stderrHas {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr)
				}
			}
			if code != 0 && stdout != "" && !strings.Contains(strings.Join(tt.args, " "), "--dry-run") {
				t.Errorf("pools printed although the exit status is %d:\n%s", code, stdout)
			}
			for f, wants := range tt.files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range wants {
					if !strings.Contains(string(data), w) {
						t.Errorf("%s lacks %q:\n%s", filepath.Base(f), w, data)
					}
				}
				if f == nodeOut {
					if _, err := nodeconfig.Parse(data); err != nil {
						t.Errorf("the kubelet plugin would refuse %s: %v", filepath.Base(f), err)
					}
				}
			}
			if _, err := os.Stat(valuesOut); tt.noFiles && err == nil {
				t.Errorf("%s written although the exit status is %d", filepath.Base(valuesOut), code)
			}
		})
	}
}

package schedperf

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	rdmafake "github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned/fake"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/test/scale"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../../.."

// render executes a template as scheduler_perf's createAny does for object index.
func render(t *testing.T, tmpl []byte, index int) []byte {
	t.Helper()
	parsed, err := template.New("object").Parse(string(tmpl))
	if err != nil {
		t.Fatalf("parse template: %v\n%s", err, tmpl)
	}
	var out bytes.Buffer
	if err := parsed.Execute(&out, map[string]any{"Index": index, "Count": index + 1}); err != nil {
		t.Fatalf("render template: %v\n%s", err, tmpl)
	}
	return out.Bytes()
}

// decode renders a template for index and decodes it strictly into obj.
func decode(t *testing.T, tmpl []byte, index int, obj any) {
	t.Helper()
	data := render(t, tmpl, index)
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatalf("decode rendered template: %v\n%s", err, data)
	}
}

var quantityEqual = cmp.Comparer(func(a, b apiresource.Quantity) bool { return a.Cmp(b) == 0 })

func TestSliceTemplates(t *testing.T) {
	tests := []struct {
		profile string
		// slices: one counter slice per 8 ports, then one device slice; two devices
		// (exclusive and shared) and one counter set per port.
		slices, ports, devices, counterSets int
	}{
		{profile: "dgx-h100", slices: 3, ports: 10, devices: 20, counterSets: 10},
		{profile: "roce-lag", slices: 2, ports: 8, devices: 16, counterSets: 8},
		{profile: "mixed-bond", slices: 2, ports: 6, devices: 12, counterSets: 6},
	}
	for _, tc := range tests {
		t.Run(tc.profile, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			node, err := SliceTemplates(ctx, tc.profile, scale.ModelDefault, dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(node.Slices) != tc.slices || node.Ports != tc.ports || node.Shares != 16 {
				t.Fatalf("%d slice templates, %d ports of %d shares; want %d, %d of 16", len(node.Slices), node.Ports, node.Shares, tc.slices, tc.ports)
			}
			inv, err := scale.ProfileInventory(ctx, tc.profile, dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, index := range []int{0, 7, 999} {
				name := NodeName(index)
				res, err := devicemodel.Build(inv, scale.ModelOptions(name, false))
				if err != nil {
					t.Fatal(err)
				}
				want := res.ResourceSlices()
				devices, counterSets := 0, 0
				for i, tmpl := range node.Slices {
					var got resourceapi.ResourceSlice
					decode(t, tmpl, index, &got)
					if got.Spec.NodeName == nil || *got.Spec.NodeName != name || got.Spec.Pool.Name != res.PoolName || !strings.HasSuffix(got.Name, "-"+name) {
						t.Errorf("slice %d for index %d: name %q, node %v, pool %q; want node %s and pool %s", i, index, got.Name, got.Spec.NodeName, got.Spec.Pool.Name, name, res.PoolName)
					}
					// Rendered for index i, a template is exactly what the plugin
					// publishes on scheduler_perf's node i.
					if diff := cmp.Diff(want[i], &got, quantityEqual); diff != "" {
						t.Errorf("slice %d for index %d differs from the model of %s (-want +got):\n%s", i, index, name, diff)
					}
					devices += len(got.Spec.Devices)
					counterSets += len(got.Spec.SharedCounters)
				}
				if devices != tc.devices || counterSets != tc.counterSets {
					t.Errorf("index %d: %d devices, %d counter sets; want %d, %d", index, devices, counterSets, tc.devices, tc.counterSets)
				}
			}
		})
	}
}

// chartPools are the chart's default RdmaPools, as the API would serve them.
func chartPools(t *testing.T) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "deployments", "static", "rdma-dra-driver.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []runtime.Object
	for _, doc := range strings.Split(string(data), "\n---") {
		if !strings.Contains(doc, "\nkind: RdmaPool") {
			continue
		}
		pool := &v1alpha1.RdmaPool{}
		if err := yaml.UnmarshalStrict([]byte(doc), pool); err != nil {
			t.Fatalf("decode RdmaPool: %v", err)
		}
		pool.UID = types.UID("uid-" + pool.Name)
		out = append(out, pool)
	}
	return out
}

// controllerClasses runs the project's controller on fake clients holding the chart's
// pools until it has written a DeviceClass for each, and returns them by name.
func controllerClasses(t *testing.T) map[string]*resourceapi.DeviceClass {
	t.Helper()
	// The generated fake clientset sends no bookmark at the end of a watch's initial
	// events, and does not say so, which a watch-list informer of pools would wait for.
	clientfeaturestesting.SetFeatureDuringTest(t, clientfeatures.WatchListClient, false)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	pools := chartPools(t)
	kube := fake.NewClientset()
	c := controller.New(devicemodel.DefaultDriverName, kube, rdmafake.NewSimpleClientset(pools...), controller.NewMetrics())
	done := make(chan error)
	go func() { done <- c.Run(ctx, 1) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller: %v", err)
		}
	}()
	out := map[string]*resourceapi.DeviceClass{}
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := kube.ResourceV1().DeviceClasses().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for i := range list.Items {
			out[list.Items[i].Name] = &list.Items[i]
		}
		return len(out) == len(pools), nil
	})
	if err != nil {
		t.Fatalf("the controller wrote DeviceClasses %v for %d pools: %v", out, len(pools), err)
	}
	return out
}

func TestClassTemplates(t *testing.T) {
	templates, err := ClassTemplates(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	want := controllerClasses(t)
	if len(templates) != len(want) {
		t.Errorf("%d class templates, the controller writes %d classes", len(templates), len(want))
	}
	for _, name := range []string{ShareClass, PortClass} {
		t.Run(name, func(t *testing.T) {
			var got resourceapi.DeviceClass
			decode(t, templates[name], 0, &got)
			if got.Kind != "DeviceClass" || got.APIVersion != resourceapi.SchemeGroupVersion.String() || got.Name != name {
				t.Errorf("template is %s %s %q, want DeviceClass %s %q", got.APIVersion, got.Kind, got.Name, resourceapi.SchemeGroupVersion, name)
			}
			w := want[name]
			if w == nil {
				t.Fatalf("the controller wrote no DeviceClass %s", name)
			}
			if diff := cmp.Diff(w.Spec.Selectors, got.Spec.Selectors); diff != "" {
				t.Errorf("selectors differ from the controller's (-controller +template):\n%s", diff)
			}
		})
	}
}

func TestClaimTemplates(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    Request
		// capacity is the request's capacity, if any.
		capacity *resourceapi.CapacityRequirements
	}{
		{name: "share", r: Request{Class: ShareClass}},
		{name: "port", r: Request{Class: PortClass}},
		{name: "capacity-port", r: Request{Class: ShareClass, Shares: 16}, capacity: &resourceapi.CapacityRequirements{
			Requests: map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: apiresource.MustParse("16")}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wantRequests := []resourceapi.DeviceRequest{{Name: "req-0", Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: tc.r.Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1, Capacity: tc.capacity,
			}}}
			data, err := ClaimTemplate(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			var tmpl resourceapi.ResourceClaimTemplate
			decode(t, data, 0, &tmpl)
			if tmpl.Kind != "ResourceClaimTemplate" || tmpl.Name != podClaimTemplate {
				t.Errorf("claim template is %s %q, want ResourceClaimTemplate %q", tmpl.Kind, tmpl.Name, podClaimTemplate)
			}
			if diff := cmp.Diff(wantRequests, tmpl.Spec.Spec.Devices.Requests, quantityEqual); diff != "" {
				t.Errorf("claim template requests (-want +got):\n%s", diff)
			}

			if data, err = FillClaim("v", tc.r); err != nil {
				t.Fatal(err)
			}
			var claim resourceapi.ResourceClaim
			decode(t, data, 41, &claim)
			if claim.Kind != "ResourceClaim" || claim.Name != "rdma-fill-v-41" {
				t.Errorf("fill claim 41 is %s %q, want ResourceClaim %q", claim.Kind, claim.Name, "rdma-fill-v-41")
			}
			if diff := cmp.Diff(wantRequests, claim.Spec.Devices.Requests, quantityEqual); diff != "" {
				t.Errorf("fill claim requests (-want +got):\n%s", diff)
			}
		})
	}
}

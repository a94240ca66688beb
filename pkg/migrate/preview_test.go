package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// mockNode writes profile and returns its sysfs root and inventory.
func mockNode(t *testing.T, profile string) (string, *discovery.Inventory) {
	t.Helper()
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(dir, mocknode.SysDir)
	inv, err := discovery.New(discovery.Options{SysfsRoot: root}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return root, inv
}

// ports lists "mlx5_<from>/1" .. "mlx5_<to>/1".
func ports(from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("mlx5_%d/1", i))
	}
	return out
}

// TestPreviewRealWorldConfigs converts configurations written after the device plugins'
// published examples and compares, port by port on a mock node, what the plugin selected
// (emulated from its documented selector semantics) with what the pool's DeviceClass CEL
// selects on the devices the kubelet plugin publishes.
func TestPreviewRealWorldConfigs(t *testing.T) {
	type sel struct{ old, new []string }
	tests := []struct {
		file, profile string
		allow         []string
		problems      []string // WideningKeys of the problems, or the entry for others
		want          map[string]sel
	}{
		{file: "shared-multiple-resources.json", profile: "mixed-bond", want: map[string]sel{
			"rdma/hca_shared_devices_a": {ports(0, 3), ports(0, 3)},
			"rdma/hca_shared_devices_b": {ports(4, 5), ports(4, 5)},
			"rdma/hca_shared_devices_c": {ports(0, 1), ports(0, 1)},
		}},
		{file: "shared-rdmahcamax-devices.json", profile: "mixed-bond", want: map[string]sel{
			"rdma/hca_shared_devices_x": {ports(2, 3), ports(2, 3)},
		}},
		// The plugin matched the PCI functions' own interfaces; the pool matches the
		// ports' netdev, which for ports in bond0 is the bond: the pool selects nothing.
		// Narrower, never wider, and the preview shows it.
		{file: "shared-ifnames-linktypes.json", profile: "mixed-bond", want: map[string]sel{
			"rdma/roce_shared": {ports(4, 5), nil},
			"rdma/ib_shared":   {ports(0, 3), ports(0, 3)},
		}},
		{file: "shared-nicclusterpolicy.yaml", profile: "sriov", want: map[string]sel{
			"rdma/rdma_shared_device_a": {ports(0, 0), ports(0, 0)},
		}},
		{file: "sriov-rootdevices.json", profile: "sriov", problems: []string{"mlnx_rdma_vfs:rootDevices"}},
		// Accepted, the widening is visible: the PF, which the SR-IOV plugin never
		// handed out while it had VFs, is in the pool.
		{file: "sriov-rootdevices.json", profile: "sriov", allow: []string{"mlnx_rdma_vfs:rootDevices"}, want: map[string]sel{
			"nvidia.com/mlnx_rdma_vfs": {ports(1, 16), ports(0, 16)},
		}},
		{file: "sriov-selectors-isrdma.json", profile: "sriov", problems: []string{"first_vfs:pfNames"}},
		{file: "sriov-selectors-isrdma.json", profile: "sriov", allow: []string{"first_vfs:pfNames"}, want: map[string]sel{
			"nvidia.com/cx6dx_vfs": {ports(1, 16), ports(1, 16)},
			"nvidia.com/first_vfs": {ports(1, 4), ports(0, 16)},
		}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s on %s %v", tt.file, tt.profile, tt.allow), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "nodes", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			convert := FromSharedDevicePlugin
			if strings.HasPrefix(tt.file, "sriov-") {
				convert = FromSRIOVDevicePlugin
			}
			res, err := convert(data, Options{AllowWidening: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			var problems []string
			for _, p := range res.Problems {
				problems = append(problems, p.WideningKey)
			}
			if !slices.Equal(problems, tt.problems) {
				t.Fatalf("problems %q, want %q: %v", problems, tt.problems, res.Problems)
			}
			if tt.want == nil {
				return
			}
			root, inv := mockNode(t, tt.profile)
			rows, err := Preview(context.Background(), res, inv, SysfsPCIFacts(root))
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Entries) != len(tt.want) {
				t.Fatalf("%d entries, want %d", len(res.Entries), len(tt.want))
			}
			for i, e := range res.Entries {
				want, ok := tt.want[e.Resource]
				if !ok {
					t.Fatalf("unexpected entry %s", e.Resource)
				}
				var old, new []string
				for _, r := range rows {
					name := fmt.Sprintf("%s/%d", r.Port.IBDev, r.Port.Port)
					if r.Old[i] == Unknown {
						t.Errorf("%s: %s unknown", e.Resource, name)
					}
					if r.Old[i] == Yes {
						old = append(old, name)
					}
					if r.New[i] {
						new = append(new, name)
					}
				}
				slices.Sort(old)
				slices.Sort(new)
				w := want
				slices.Sort(w.old)
				slices.Sort(w.new)
				if !slices.Equal(old, w.old) {
					t.Errorf("%s: device plugin selected %v, want %v", e.Resource, old, w.old)
				}
				if !slices.Equal(new, w.new) {
					t.Errorf("%s: pool selects %v, want %v", e.Resource, new, w.new)
				}
				// The invariant: without an accepted widening, nothing only the pool selects.
				if len(tt.allow) == 0 {
					for _, n := range new {
						if !slices.Contains(old, n) {
							t.Errorf("%s: pool widened to %s without acceptance", e.Resource, n)
						}
					}
				}
			}
		})
	}
}

func TestChartDefaultPoolsMatchValues(t *testing.T) {
	data, err := os.ReadFile("../../deployments/helm/rdma-dra-driver/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := ChartPools(data, ChartSource)
	if err != nil {
		t.Fatal(err)
	}
	if want := ChartDefaultPools(); !slices.Equal(got, want) {
		t.Errorf("chart values.yaml pools %+v, ChartDefaultPools %+v: update ChartDefaultPools", got, want)
	}
}

func TestCheckConflicts(t *testing.T) {
	res, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"hca_shared_devices_a","selectors":{"vendors":["15b3"]}},{"resourceName":"b","selectors":{"vendors":["15b3"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	existing, err := ExistingObjects([]byte(`apiVersion: v1
kind: List
items:
- apiVersion: resource.k8s.io/v1
  kind: DeviceClass
  metadata: {name: old-class}
  spec: {extendedResourceName: rdma/b}
- apiVersion: rdma.dra.io/v1alpha1
  kind: RdmaPool
  metadata: {name: b}
  spec: {mode: shared}
---
kind: ConfigMap
metadata: {name: ignored}
`), "existing.yaml")
	if err != nil {
		t.Fatal(err)
	}
	values, err := ChartPools([]byte("pools:\n  shared:\n    extendedResourceName: \"\"\n"), "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res.CheckConflicts(append(values, existing...))
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.String())
	}
	want := []string{
		`pool b: spec.extendedResourceName: rdma/b is already served by DeviceClass old-class (existing.yaml): it keeps the name, and pods asking for rdma/b would be served from its ports, not the migrated selection; remove spec.extendedResourceName from DeviceClass old-class or delete that class first`,
		`pool b: metadata.name: an RdmaPool of that name exists (existing.yaml); kubectl apply would replace it: rename one of them`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The chart's defaults leave the device plugin's names free.
	res.Problems = nil
	res.CheckConflicts(ChartDefaultPools())
	if len(res.Problems) != 0 {
		t.Errorf("conflicts with the chart's defaults: %v", res.Problems)
	}
	// A chart installed with the most common name set collides, and the problem names
	// the value that frees it.
	set, err := ChartPools([]byte("pools:\n  shared:\n    extendedResourceName: rdma/hca_shared_devices_a\n"), "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res.CheckConflicts(set)
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].String(), `rdma/hca_shared_devices_a is already served by RdmaPool rdma-shared (values.yaml)`) ||
		!strings.Contains(res.Problems[0].String(), `--set pools.shared.extendedResourceName=""`) {
		t.Errorf("chart value conflict: %v", res.Problems)
	}
}

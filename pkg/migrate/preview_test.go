package migrate

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

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
			cfg, err := NodeConfigFor(res, nil)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := Preview(context.Background(), res, inv, SysfsPCIFacts(root), cfg)
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
	// pools.legacy is off by default; turned on, it is the pool chartLegacyPool knows.
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	legacyValues, ok := values["pools"].(map[string]any)["legacy"].(map[string]any)
	if !ok {
		t.Fatal("values.yaml has no pools.legacy")
	}
	legacyValues["enabled"] = true
	on, err := yaml.Marshal(values)
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := ChartPools(on, ChartSource)
	if err != nil {
		t.Fatal(err)
	}
	if want := append(ChartDefaultPools(), chartLegacyPool()); !slices.Equal(legacy, want) {
		t.Errorf("chart values.yaml with pools.legacy.enabled: pools %+v, want %+v: update chartLegacyPool", legacy, want)
	}
}

func TestCheckConflicts(t *testing.T) {
	res, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"hca_shared_devices_a","rdmaHcaMax":10,"selectors":{"vendors":["15b3"]}},{"resourceName":"b","rdmaHcaMax":10,"selectors":{"vendors":["15b3"]}}]}`), Options{})
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
	// The chart's legacy pool, turned on, has the device plugin's default name twice
	// over; the problems name the value that turns it off.
	res.Problems = nil
	legacy, err := ChartPools([]byte("pools:\n  legacy:\n    enabled: true\n"), "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res.CheckConflicts(legacy)
	var got2 []string
	for _, p := range res.Problems {
		got2 = append(got2, p.String())
	}
	want2 := []string{
		`pool hca-shared-devices-a: metadata.name: the chart installs an RdmaPool of that name (values.yaml), and helm and kubectl apply would take turns replacing it; ` +
			`install or upgrade the chart with --set pools.legacy.enabled=false (the migrated pools take its place) and tell migrate with --chart-values (a values file holding the same)`,
	}
	if !slices.Equal(got2, want2) {
		t.Errorf("chart legacy pool conflicts:\n%s\nwant:\n%s", strings.Join(got2, "\n"), strings.Join(want2, "\n"))
	}
}

// TestNodeFindings turns node previews into the verdict lines and the problems a dry run
// against a node reports: the pool's side of a legacy pool is its device's ports, a
// widening is a problem unless --allow-wider names the resource, a pool that serves
// nothing where the plugin did is a problem, narrower is reported.
func TestNodeFindings(t *testing.T) {
	tests := []struct {
		name, profile, input string
		sriov                bool
		allowWidening        []string
		allowWider           []string
		want                 []string // "resource: plugin/pool verdict"
		problems             []string // WideningKey or Entry of each problem
		note                 string   // a note that must be there
	}{
		{name: "the seed pod's rails", profile: "dgx-h100", input: railsConfig,
			want: []string{
				"rdma/rdma_shared_device_a: 8/8 same ports",
				"rdma/rdma_shared_device_b: 2/2 same ports",
			}},
		// Only the link type: the plugin never took soft-RoCE, and pciAddresses ["*"]
		// keeps the legacy device from it.
		{name: "soft-RoCE stays out", profile: "soft-roce", input: `{"configList":[{"resourceName":"eth","rdmaHcaMax":4,"selectors":{"linkTypes":["ether"]}}]}`,
			want:     []string{"rdma/eth: 0/0 MISSING: neither the device plugin nor the pool selects a port of this node: run the dry run on a node the entry is for (a typo in its selectors looks the same)"},
			problems: []string{"rdma/eth (pool eth) on node"}},
		// The plugin matched the bonded functions' own netdevs; the node reports the bond.
		{name: "ifNames of bonded ports", profile: "mixed-bond", input: `{"configList":[{"resourceName":"roce","rdmaHcaMax":4,"selectors":{"ifNames":["enp94s0f0np0","enp94s0f1np1"]}},` +
			`{"resourceName":"ib","rdmaHcaMax":4,"selectors":{"linkTypes":["infiniband"],"ifNames":["ibp24s0"]}}]}`,
			want: []string{
				"rdma/roce: 2/0 MISSING: the pool selects no port of this node, the device plugin selected mlx5_4/1, mlx5_5/1",
				"rdma/ib: 1/1 same ports",
			},
			problems: []string{"rdma/roce (pool roce) on node"}},
		{name: "an accepted widening of the conversion shows", profile: "sriov", sriov: true, allowWidening: []string{"vfs:rootDevices"},
			input: `{"resourceList":[{"resourceName":"vfs","selectors":{"vendors":["15b3"],"rootDevices":["0000:3b:00.0"],"isRdma":true}}]}`,
			want:  []string{"intel.com/vfs: 16/17 WIDER: only the pool selects mlx5_0/1"}, problems: []string{"intel.com/vfs"}},
		{name: "and --allow-wider accepts what the node shows", profile: "sriov", sriov: true, allowWidening: []string{"vfs:rootDevices"}, allowWider: []string{"intel.com/vfs"},
			input: `{"resourceList":[{"resourceName":"vfs","selectors":{"vendors":["15b3"],"rootDevices":["0000:3b:00.0"],"isRdma":true}}]}`,
			want:  []string{"intel.com/vfs: 16/17 WIDER: only the pool selects mlx5_0/1"},
			note:  "WIDER intel.com/vfs (pool vfs) on node: only the pool selects mlx5_0/1; accepted by --allow-wider intel.com/vfs"},
		{name: "narrower is reported", profile: "sriov", sriov: true,
			input: `{"resourceList":[{"resourceName":"vfs","selectors":{"vendors":["15b3"],"devices":["101e"],"isRdma":true}},` +
				`{"resourceName":"pf","selectors":{"pciAddresses":["0000:3b:00.0","0000:3b:00.2"],"isRdma":true}}]}`,
			want: []string{
				"intel.com/vfs: 16/16 same ports",
				// The SR-IOV plugin never handed out the PF while it has VFs.
				"intel.com/pf: 1/2 WIDER: only the pool selects mlx5_0/1",
			},
			problems: []string{"intel.com/pf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := Options{AllowWidening: tt.allowWidening, AllowWider: tt.allowWider}
			convert := FromSharedDevicePlugin
			if tt.sriov {
				convert = FromSRIOVDevicePlugin
			}
			res, err := convert([]byte(tt.input), opts)
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Problems) > 0 {
				t.Fatalf("conversion problems: %v", res.Problems)
			}
			root, inv := mockNode(t, tt.profile)
			cfg, err := NodeConfigFor(res, nil)
			if err != nil {
				t.Fatal(err)
			}
			rows, err := Preview(context.Background(), res, inv, SysfsPCIFacts(root), cfg)
			if err != nil {
				t.Fatal(err)
			}
			findings := NodeFindings(res, rows, "node")
			var got []string
			for _, f := range findings {
				got = append(got, fmt.Sprintf("%s: %s/%s %s", f.Resource, f.PluginSide, f.PoolSide, f.Verdict()))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			res.Judge(findings, opts)
			var problems []string
			for _, p := range res.Problems {
				if p.Widens() {
					problems = append(problems, p.WideningKey)
					if p.Flag != FlagAllowWider {
						t.Errorf("problem %q: want it accepted by %s", p, FlagAllowWider)
					}
				} else {
					problems = append(problems, p.Entry)
				}
			}
			if !slices.Equal(problems, tt.problems) {
				t.Errorf("problems %q, want %q: %v", problems, tt.problems, res.Problems)
			}
			if tt.note != "" && !slices.Contains(res.Notes, tt.note) {
				t.Errorf("no note %q:\n%s", tt.note, strings.Join(res.Notes, "\n"))
			}
		})
	}
}

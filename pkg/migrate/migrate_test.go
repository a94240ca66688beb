package migrate

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// render is what the CLI prints: the pools on stdout, then the notes on stderr.
func render(t *testing.T, res *Result) string {
	t.Helper()
	out, err := WriteYAML(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	return string(out) + "# notes (stderr)\n" + strings.Join(res.Notes, "\n") + "\n"
}

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	yamls, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, yamls...)
	if len(files) < 6 {
		t.Fatalf("only %d inputs in testdata", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			convert := func(data []byte) (*Result, error) { return FromSharedDevicePlugin(data) }
			if strings.HasPrefix(filepath.Base(file), "sriov-") {
				convert = func(data []byte) (*Result, error) { return FromSRIOVDevicePlugin(data, "") }
			}
			res, err := convert(data)
			if err != nil {
				t.Fatal(err)
			}
			got := render(t, res)
			golden := file + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/migrate -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test ./pkg/migrate -update rewrites it):\n%s", golden, got)
			}
			// Every pool printed is one the controller accepts.
			for _, p := range res.Pools {
				if errs := p.Validate(); len(errs) > 0 {
					t.Errorf("pool %s is invalid: %v", p.Name, errs.ToAggregate())
				}
			}
			checkDecodable(t, got)
		})
	}
}

// checkDecodable decodes every printed document strictly back into an RdmaPool.
func checkDecodable(t *testing.T, out string) {
	t.Helper()
	names := sets.New[string]()
	for _, doc := range strings.Split(strings.Split(out, "# notes (stderr)\n")[0], "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var p v1alpha1.RdmaPool
		if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
			t.Errorf("decode printed pool: %v\n%s", err, doc)
		}
		if p.APIVersion != "rdma.dra.io/v1alpha1" || p.Kind != "RdmaPool" || names.Has(p.Name) {
			t.Errorf("pool %q: apiVersion %q kind %q (duplicate name: %v)", p.Name, p.APIVersion, p.Kind, names.Has(p.Name))
		}
		names.Insert(p.Name)
	}
}

func TestKeyNotes(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	shared, err := FromSharedDevicePlugin(read("shared-readme.json"))
	if err != nil {
		t.Fatal(err)
	}
	sriov, err := FromSRIOVDevicePlugin(read("sriov-selectors-list.json"), "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		res   *Result
		wants []string
	}{
		{"a unit was every HCA", shared, []string{"gave a pod every HCA", "allocationMode: All"}},
		{"rdmaHcaMax", shared, []string{"rdmaHcaMax 1000", "nodeConfig.shares"}},
		{"VF ranges", sriov, []string{"enp59s0f0np0#0-3", "no equivalent"}},
		{"rootDevices", sriov, []string{"rootDevices [0000:3b:00.0] dropped"}},
		{"second selector set", sriov, []string{"2 selector sets"}},
		{"non-RDMA skipped", sriov, []string{"(dpdk_vfs): not an RDMA resource"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := strings.Join(tt.res.Notes, "\n")
			for _, w := range tt.wants {
				if !strings.Contains(all, w) {
					t.Errorf("no note says %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestUnreadableInput(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not YAML", "{", "parse input"},
		{"another kind", "kind: Pod\n", "input is a Pod"},
		{"ConfigMap without config.json", "kind: ConfigMap\ndata: {other: x}\n", `no data."config.json"`},
		{"NicClusterPolicy without the section", "kind: NicClusterPolicy\nspec: {}\n", "no spec.rdmaSharedDevicePlugin.config"},
		{"empty configList", `{"configList": []}`, "no configList entries"},
		{"wrong type", `{"configList": [{"resourceName": 7}]}`, "decode config file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromSharedDevicePlugin([]byte(tt.data))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if _, err := FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourceName":"x","selectors":7}]}`), ""); err == nil ||
		!strings.Contains(err.Error(), "decode selectors") {
		t.Errorf("sriov with bad selectors: %v", err)
	}
}

func TestPoolName(t *testing.T) {
	taken := map[string]bool{}
	for _, tt := range []struct{ in, want string }{
		{"hca_shared_devices_a", "hca-shared-devices-a"},
		{"HCA_Shared_Devices_A", "hca-shared-devices-a-2"},
		{"__", "rdma-pool"},
		{"a..b", "a-b"},
		{strings.Repeat("x", 300), strings.Repeat("x", 56)},
	} {
		if got := poolName(tt.in, taken); got != tt.want {
			t.Errorf("poolName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

package migrate

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// FuzzMigrate feeds arbitrary files to both converters: the input is an operator's file,
// so whatever it holds must end in pools or an error, never a panic, and every pool that
// comes out must be one the API accepts.
func FuzzMigrate(f *testing.F) {
	seeds, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range seeds {
		if info, err := os.Stat(p); err != nil || info.IsDir() || filepath.Ext(p) == ".golden" || filepath.Base(p) == "README.md" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"configList":[{"resourceName":"a","selectors":{"ifNames":["ib*"]}}]}`))
	f.Add([]byte(`{"resourceList":[{"resourceName":"b","isRdma":true,"selectors":[{"vendors":["15b3"]}]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		for name, convert := range map[string]func([]byte) (*Result, error){
			"shared-dev-plugin": func(d []byte) (*Result, error) { return FromSharedDevicePlugin(d, Options{}) },
			"sriov":             func(d []byte) (*Result, error) { return FromSRIOVDevicePlugin(d, Options{}) },
		} {
			res, err := convert(data)
			if err != nil {
				continue
			}
			for i := range res.Pools {
				if errs := res.Pools[i].Validate(); len(errs) > 0 {
					t.Errorf("%s: converted pool %q is invalid: %v", name, res.Pools[i].Name, errs.ToAggregate())
				}
			}
			if _, err := WriteYAML(res.Pools); err != nil {
				t.Errorf("%s: write pools: %v", name, err)
			}
			// The node side of every legacy pool is there and the kubelet plugin takes it.
			if len(res.LegacyResources) <= nodeconfig.MaxLegacyResources {
				if _, err := NodeConfig(nil, res.LegacyResources); err != nil {
					t.Errorf("%s: node side: %v", name, err)
				}
			}
			for _, p := range res.Pools {
				if p.Spec.Mode == v1alpha1.PoolModeLegacy && !slices.ContainsFunc(res.LegacyResources, func(lr nodeconfig.LegacyResource) bool { return lr.Name == p.Name }) {
					t.Errorf("%s: legacy pool %s without its legacyResources entry", name, p.Name)
				}
			}
		}
	})
}

// FuzzNodeSide merges legacy resources into arbitrary chart values, the operator's file:
// an error or a file the kubelet plugin reads with every resource in it, never a panic.
func FuzzNodeSide(f *testing.F) {
	for _, seed := range []string{"", "nodeConfig: {}\n", "# c\nnodeConfig:\n  shares: 8\n  legacyResources:\n  - name: a\n    maxPods: 1\n",
		"nodeConfig: [1]\n", "nodeConfig:\n  legacyResources: x\n", "- a\n", "a: &x {b: *x}\n"} {
		f.Add([]byte(seed))
	}
	resources := []nodeconfig.LegacyResource{{Name: "a", MaxPods: 63, Selectors: nodeconfig.Selector{Vendors: []string{"15b3"}}}, {Name: "b", MaxPods: 2}}
	f.Fuzz(func(t *testing.T, base []byte) {
		if _, err := Values(base, resources); err != nil {
			return
		}
		out, err := NodeConfig(base, resources)
		if err != nil {
			return
		}
		cfg, err := nodeconfig.Parse(out)
		if err != nil {
			t.Fatalf("the kubelet plugin refuses the node config written over %q: %v\n%s", base, err, out)
		}
		for _, r := range resources {
			if !slices.ContainsFunc(cfg.LegacyResources, func(lr nodeconfig.LegacyResource) bool { return lr.Name == r.Name && lr.MaxPods == r.MaxPods }) {
				t.Errorf("node config over %q lacks %s:\n%s", base, r.Name, out)
			}
		}
	})
}

func TestInvalidPoolsAreProblems(t *testing.T) {
	for _, tc := range []struct {
		name    string
		convert func([]byte, Options) (*Result, error)
		input   string
	}{
		{"shared-dev-plugin", FromSharedDevicePlugin,
			`{"configList":[{"resourceName":" ","rdmaHcaMax":1,"selectors":{"vendors":["15b3"]}},{"resourceName":"good","rdmaHcaMax":1,"selectors":{"vendors":["15b3"]}}]}`},
		{"sriov", FromSRIOVDevicePlugin,
			`{"resourceList":[{"resourceName":"bad name","isRdma":true,"selectors":{"vendors":["15b3"]}},{"resourceName":"good","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := tc.convert([]byte(tc.input), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.ContainsFunc(res.Problems, func(p Problem) bool { return strings.Contains(p.String(), "the API would refuse it") }) {
				t.Errorf("no problem says a pool is invalid: %v", res.Problems)
			}
		})
	}
}

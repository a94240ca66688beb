package deployments

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// The pool values of the chart (pools.shared, pools.exclusive, pools.extra[], pools.legacy)
// take the RdmaPool CRD's own schema of the fields they carry: hack/valuesschema writes it
// into values.schema.json. These cases are the mistakes that schema catches before the
// API server would prune them (a misspelt selector selects every port) or refuse them
// halfway through an install.

// poolValueCase is one set of pools values: valid, or refused by the values schema at
// the JSON pointer schemaAt (what Helm's error names).
type poolValueCase struct {
	name, pools string // YAML of .Values.pools, merged over the defaults
	schemaAt    string
}

// poolValueCases are the mistakes the values schema takes from the RdmaPool CRD.
func poolValueCases() []poolValueCase {
	return []poolValueCase{
		{name: "every field", pools: `
shared: {selectors: {linkTypes: [InfiniBand, eth], vendors: ["15b3"], deviceIDs: ["0x1021"], ifNames: ["ibp*"], minSpeedGbps: 200},
  cel: 'device.attributes["rdma.dra.io"].numa_node == 0', extendedResourceName: rdma/hca_shared_a}
extra: [{name: roce, mode: exclusive, selectors: {linkTypes: [Ethernet], pciAddresses: ["0000:1a:*"]}, config: {allowedCharDevices: verbs}}]`},
		{name: "empty values the template leaves out", pools: `shared: {selectors: {}, cel: "", extendedResourceName: "", config: {}}`},
		{name: "misspelt selector", pools: `shared: {selectors: {linkType: [Ethernet]}}`, schemaAt: "/pools/shared/selectors"},
		{name: "link type in the wrong case", pools: `shared: {selectors: {linkTypes: [Infiniband]}}`, schemaAt: "/pools/shared/selectors/linkTypes/0"},
		{name: "link type twice", pools: `exclusive: {selectors: {linkTypes: [IB, IB]}}`, schemaAt: "/pools/exclusive/selectors/linkTypes"},
		{name: "vendor not four hex digits", pools: `exclusive: {selectors: {vendors: ["15b"]}}`, schemaAt: "/pools/exclusive/selectors/vendors/0"},
		{name: "negative speed", pools: `shared: {selectors: {minSpeedGbps: -1}}`, schemaAt: "/pools/shared/selectors/minSpeedGbps"},
		{name: "extended resource without a domain", pools: `shared: {extendedResourceName: hca_shared_a}`, schemaAt: "/pools/shared/extendedResourceName"},
		{name: "extra pool mode in the wrong case", pools: `extra: [{name: a, mode: Shared}]`, schemaAt: "/pools/extra/0/mode"},
		{name: "extra pool misspelt selector", pools: `extra: [{name: a, mode: shared, selectors: {ibdev: [mlx5_0]}}]`, schemaAt: "/pools/extra/0/selectors"},
		{name: "legacy pool's resource without a domain", pools: `legacy: {enabled: true, extendedResourceName: hca_shared_devices_a}`, schemaAt: "/pools/legacy/extendedResourceName"},
		{name: "legacy pool's resource empty", pools: `legacy: {extendedResourceName: ""}`, schemaAt: "/pools/legacy/extendedResourceName"},
	}
}

// mergePools returns the chart's default values with pools (YAML) merged over
// .Values.pools, as Helm merges a values file.
func mergePools(t *testing.T, pools string) map[string]any {
	t.Helper()
	var over map[string]any
	if err := yaml.Unmarshal([]byte(pools), &over); err != nil {
		t.Fatalf("bad test value: %v", err)
	}
	values := chartValues(t)
	p := values["pools"].(map[string]any)
	for k, v := range over {
		if m, ok := v.(map[string]any); ok {
			merged := map[string]any{}
			for dk, dv := range p[k].(map[string]any) {
				merged[dk] = dv
			}
			for ok, ov := range m {
				merged[ok] = ov
			}
			v = merged
		}
		p[k] = v
	}
	return values
}

// TestPoolValuesSchema checks the cases with the library and the draft Helm uses, in
// process: fast, and without a Helm binary.
func TestPoolValuesSchema(t *testing.T) {
	schema := chartSchema(t, "")
	for _, tc := range poolValueCases() {
		t.Run(tc.name, func(t *testing.T) {
			err := schema.Validate(mergePools(t, tc.pools))
			if tc.schemaAt == "" {
				if err != nil {
					t.Fatalf("the schema refuses it: %v", err)
				}
				return
			}
			var verr *jsonschema.ValidationError
			if !errors.As(err, &verr) {
				t.Fatalf("the schema accepts it (%v)", err)
			}
			if !slices.Contains(errorLocations(verr), tc.schemaAt) {
				t.Errorf("the schema's error does not point at %s:\n%v", tc.schemaAt, err)
			}
		})
	}
}

// TestHelmPoolValues runs the same cases through helm template with a values file: the
// mistakes fail naming the field, the valid values render RdmaPools with every field.
func TestHelmPoolValues(t *testing.T) {
	helm := helmBinary(t)
	for _, tc := range poolValueCases() {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "values.yaml")
			if err := os.WriteFile(file, []byte("pools:\n"+indent(tc.pools)), 0o600); err != nil {
				t.Fatal(err)
			}
			out, err := runHelm(t, helm, "template", chartDir, "-f", file)
			if tc.schemaAt != "" {
				if err == nil {
					t.Fatal("helm template accepts it")
				}
				if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") ||
					!strings.Contains(err.Error(), tc.schemaAt) {
					t.Errorf("helm's error does not point at %s:\n%v", tc.schemaAt, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			objs, err := decodeManifests("helm template", []byte(out))
			if err != nil {
				t.Fatal(err)
			}
			pools := map[string]*v1alpha1.RdmaPool{}
			for _, o := range objs {
				if p, ok := o.obj.(*v1alpha1.RdmaPool); ok {
					pools[p.Name] = p
				}
			}
			if tc.name != "every field" {
				return
			}
			shared, roce := pools["rdma-shared"], pools["roce"]
			if shared == nil || roce == nil {
				t.Fatalf("no RdmaPools rdma-shared and roce in:\n%s", out)
			}
			sel := shared.Spec.Selectors
			if len(sel.LinkTypes) != 2 || len(sel.Vendors) != 1 || len(sel.DeviceIDs) != 1 || len(sel.IfNames) != 1 ||
				sel.MinSpeedGbps == nil || *sel.MinSpeedGbps != 200 || shared.Spec.CEL == "" ||
				shared.Spec.ExtendedResourceName == nil || *shared.Spec.ExtendedResourceName != "rdma/hca_shared_a" {
				t.Errorf("rdma-shared lost fields of its value: %+v", shared.Spec)
			}
			if roce.Spec.Mode != v1alpha1.PoolModeExclusive || len(roce.Spec.Selectors.PCIAddresses) != 1 || roce.Spec.Config == nil {
				t.Errorf("roce lost fields of its value: %+v", roce.Spec)
			}
		})
	}
}

func indent(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		b.WriteString("  " + line + "\n")
	}
	return b.String()
}

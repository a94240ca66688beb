package deployments

import (
	"context"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

const crdFile = "helm/rdma-dra-driver/crds/rdma.dra.io_rdmapools.yaml"

// loadCRD reads the chart's CRD, checks that the static CRD manifest carries the same
// one and the other static manifests none (they are applied after it, once it is
// established), and converts it to the API server's internal form.
func loadCRD(t *testing.T) (*apiextensionsv1.CustomResourceDefinition, *apiextensions.CustomResourceDefinition) {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decode %s: %v", crdFile, err)
	}
	static := one[*apiextensionsv1.CustomResourceDefinition](t, decodeFile(t, staticCRDFile))
	if !reflect.DeepEqual(static, crd) {
		t.Errorf("%s carries another CRD than %s: run make manifests", staticCRDFile, crdFile)
	}
	for _, file := range staticFiles {
		if crds := only[*apiextensionsv1.CustomResourceDefinition](decodeFile(t, file)); len(crds) > 0 {
			t.Errorf("%s carries %d CRDs: they belong in %s alone, applied first", file, len(crds), staticCRDFile)
		}
	}
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	return crd, internal
}

// TestCRDIsValid runs the API server's CRD validation, which compiles every
// x-kubernetes-validations rule and checks its estimated cost.
func TestCRDIsValid(t *testing.T) {
	_, internal := loadCRD(t)
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), internal); len(errs) > 0 {
		t.Fatalf("the API server would refuse the CRD: %v", errs.ToAggregate())
	}
}

// TestCRDMatchesTypes walks the Go types and the schema together: every JSON field of
// the types is in the schema and the other way round, so that a field added to the
// types without `make generate` fails here.
func TestCRDMatchesTypes(t *testing.T) {
	crd, _ := loadCRD(t)
	if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != v1alpha1.Version {
		t.Fatalf("versions %v", crd.Spec.Versions)
	}
	if crd.Spec.Group != v1alpha1.GroupName || crd.Spec.Names.Kind != v1alpha1.RdmaPoolKind || crd.Spec.Names.Plural != v1alpha1.RdmaPoolResource ||
		crd.Spec.Scope != apiextensionsv1.ClusterScoped {
		t.Errorf("names %+v scope %s", crd.Spec.Names, crd.Spec.Scope)
	}
	root := crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	for _, part := range []string{"spec", "status"} {
		f, _ := reflect.TypeFor[v1alpha1.RdmaPool]().FieldByName(strings.ToUpper(part[:1]) + part[1:])
		compareFields(t, part, f.Type, root.Properties[part])
	}
	var enum []v1alpha1.LinkType
	for _, e := range root.Properties["spec"].Properties["selectors"].Properties["linkTypes"].Items.Schema.Enum {
		var s string
		_ = yaml.Unmarshal(e.Raw, &s)
		enum = append(enum, v1alpha1.LinkType(s))
	}
	if !slices.Equal(enum, v1alpha1.LinkTypes) {
		t.Errorf("linkTypes enum %v, Go list %v", enum, v1alpha1.LinkTypes)
	}
	var columns []string
	for _, c := range crd.Spec.Versions[0].AdditionalPrinterColumns {
		columns = append(columns, c.Name)
	}
	if want := []string{"Mode", "Ports", "Allocated", "Free", "Ready", "Extended Resource", "Age"}; !slices.Equal(columns, want) {
		t.Errorf("printer columns %v, want %v", columns, want)
	}
	if crd.Spec.Versions[0].Subresources == nil || crd.Spec.Versions[0].Subresources.Status == nil {
		t.Error("no status subresource: the controller writes status through it")
	}
}

// compareFields compares the JSON fields of a struct type with a schema's properties.
// Types the schema treats as opaque (conditions, raw config) are not descended into.
func compareFields(t *testing.T, path string, typ reflect.Type, s apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
		typ = typ.Elem()
		if s.Items != nil && s.Items.Schema != nil {
			s = *s.Items.Schema
		}
	}
	if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[runtime.RawExtension]() || typ.PkgPath() != reflect.TypeFor[v1alpha1.RdmaPool]().PkgPath() {
		return
	}
	fields := map[string]reflect.Type{}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = f.Type
	}
	var inTypes, inSchema []string
	for name := range fields {
		inTypes = append(inTypes, name)
	}
	for name := range s.Properties {
		inSchema = append(inSchema, name)
	}
	sort.Strings(inTypes)
	sort.Strings(inSchema)
	if !slices.Equal(inTypes, inSchema) {
		t.Errorf("%s: Go fields %v, schema properties %v: run make generate", path, inTypes, inSchema)
		return
	}
	for name, ft := range fields {
		compareFields(t, path+"."+name, ft, s.Properties[name])
	}
}

// TestCRDValidation validates pools against the CRD's schema and CEL rules as the API
// server would on create (and on update for the transition rules).
func TestCRDValidation(t *testing.T) {
	_, internal := loadCRD(t)
	props := internal.Spec.Validation
	if props == nil {
		props = internal.Spec.Versions[0].Schema
	}
	structural, err := schema.NewStructural(props.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	schemaValidator, _, err := validation.NewSchemaValidator(props.OpenAPIV3Schema)
	if err != nil {
		t.Fatal(err)
	}
	celValidator := cel.NewValidator(structural, true, celconfig.PerCallLimit)
	check := func(obj, old map[string]any) field.ErrorList {
		var errs field.ErrorList
		if old == nil {
			errs = validation.ValidateCustomResource(nil, obj, schemaValidator)
		} else {
			errs = validation.ValidateCustomResourceUpdate(nil, obj, old, schemaValidator)
		}
		var oldObj any
		if old != nil {
			oldObj = old
		}
		celErrs, _ := celValidator.Validate(context.Background(), nil, structural, obj, oldObj, celconfig.RuntimeCELCostBudget)
		return append(errs, celErrs...)
	}
	// pool decodes like the API server: integers become int64, as CEL rules expect.
	pool := func(name, spec string) map[string]any {
		var obj map[string]any
		doc := "apiVersion: rdma.dra.io/v1alpha1\nkind: RdmaPool\nmetadata: {name: " + name + "}\nspec: " + spec
		data, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := utiljson.Unmarshal(data, &obj); err != nil {
			t.Fatal(err)
		}
		return obj
	}
	tests := []struct {
		name      string
		obj, old  map[string]any
		wantError string
	}{
		{name: "minimal", obj: pool("rdma-shared", "{mode: shared}")},
		{name: "everything", obj: pool("ib.pool", `{mode: exclusive, cel: "true", extendedResourceName: rdma/hca_shared_devices_a,
			selectors: {vendors: ["0x15B3"], deviceIDs: ["1021"], drivers: [mlx5_core], ifNames: ["ib*"], ibdevs: ["mlx5_*"],
			linkTypes: [IB, ether], pciAddresses: ["0000:1a:*"], minSpeedGbps: 200},
			config: {apiVersion: rdma.dra.io/v1alpha1, kind: RdmaConfig, gidIndex: 3, memlock: 64Gi}}`)},
		{name: "unknown mode", obj: pool("p", "{mode: both}"), wantError: `spec.mode: Unsupported value: "both"`},
		{name: "no mode", obj: pool("p", "{}"), wantError: "spec.mode: Required value"},
		{name: "bad vendor", obj: pool("p", `{mode: shared, selectors: {vendors: ["mellanox"]}}`), wantError: "vendors must be PCI vendor IDs"},
		{name: "bad device ID", obj: pool("p", `{mode: shared, selectors: {deviceIDs: ["10210"]}}`), wantError: "deviceIDs must be PCI device IDs"},
		{name: "bad link type", obj: pool("p", `{mode: shared, selectors: {linkTypes: [token-ring]}}`), wantError: "spec.selectors.linkTypes[0]: Unsupported value"},
		{name: "negative speed", obj: pool("p", `{mode: shared, selectors: {minSpeedGbps: -1}}`), wantError: "spec.selectors.minSpeedGbps: Invalid value: -1"},
		{name: "extended resource without domain", obj: pool("p", `{mode: shared, extendedResourceName: hca}`), wantError: "must be <domain>/<name>"},
		{name: "extended resource in kubernetes.io", obj: pool("p", `{mode: shared, extendedResourceName: example.kubernetes.io/hca}`),
			wantError: "must not be in the kubernetes.io domain"},
		{name: "name not a DNS subdomain", obj: pool("Rdma_Pool", "{mode: shared}"), wantError: "metadata.name must be a DNS subdomain"},
		{name: "too many values", obj: pool("p", `{mode: shared, selectors: {drivers: [`+strings.Repeat("a,", 32)+`a]}}`), wantError: "Too many"},
		{name: "mode is immutable", obj: pool("p", "{mode: exclusive}"), old: pool("p", "{mode: shared}"), wantError: "mode is immutable"},
		{name: "selectors may change", obj: pool("p", "{mode: shared, selectors: {linkTypes: [IB]}}"), old: pool("p", "{mode: shared}")},

		{name: "legacy", obj: pool("hca-shared-devices-a", `{mode: legacy, extendedResourceName: rdma/hca_shared_devices_a,
			cel: "true", config: {apiVersion: rdma.dra.io/v1alpha1, kind: RdmaConfig, allowedCharDevices: verbs}}`)},
		{name: "legacy with the empty selectors a Go client sends", obj: pool("p", "{mode: legacy, selectors: {}}")},
		{name: "legacy with empty lists and speed 0", obj: pool("p", "{mode: legacy, selectors: {ifNames: [], linkTypes: [], minSpeedGbps: 0}}")},
		{name: "legacy with a selector", obj: pool("p", "{mode: legacy, selectors: {linkTypes: [IB]}}"),
			wantError: "spec.selectors: Invalid value: must be empty in legacy mode"},
		{name: "legacy with a minimum speed", obj: pool("p", "{mode: legacy, selectors: {minSpeedGbps: 100}}"),
			wantError: "spec.selectors: Invalid value: must be empty in legacy mode"},
		{name: "legacy with every selector", obj: pool("p", `{mode: legacy, selectors: {vendors: ["15b3"], deviceIDs: ["1021"], drivers: [mlx5_core],
			ifNames: ["ib*"], ibdevs: ["mlx5_*"], pciAddresses: ["0000:1a:*"]}}`), wantError: "must be empty in legacy mode"},
		{name: "legacy name of 56 characters", obj: pool(strings.Repeat("a", 56), "{mode: legacy}")},
		{name: "legacy name of 57 characters", obj: pool(strings.Repeat("a", 57), "{mode: legacy}"),
			wantError: "metadata.name must be a DNS label of at most 56 characters in legacy mode"},
		{name: "legacy name with a dot", obj: pool("hca.a", "{mode: legacy}"), wantError: "metadata.name must be a DNS label"},
		{name: "dotted name of 57 characters in shared mode", obj: pool(strings.Repeat("a", 55)+".a", "{mode: shared}")},
		{name: "shared becomes legacy", obj: pool("p", "{mode: legacy}"), old: pool("p", "{mode: shared}"), wantError: "mode is immutable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := check(tt.obj, tt.old)
			if spec, _ := tt.obj["spec"].(map[string]any); spec["mode"] == string(v1alpha1.PoolModeLegacy) && tt.old == nil {
				sameAsValidate(t, tt.obj, errs)
			}
			if tt.wantError == "" {
				if len(errs) > 0 {
					t.Errorf("refused: %v", errs.ToAggregate())
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.wantError) {
				t.Errorf("got %v, want an error containing %q", errs.ToAggregate(), tt.wantError)
			}
		})
	}
}

// sameAsValidate checks that RdmaPool.Validate, which the webhook and the controller
// apply, refuses the pool the CRD refused (crdErrs) with the same words, and accepts it
// otherwise.
func sameAsValidate(t *testing.T, obj map[string]any, crdErrs field.ErrorList) {
	t.Helper()
	pool := &v1alpha1.RdmaPool{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, pool); err != nil {
		t.Fatal(err)
	}
	goErrs := pool.Validate()
	if (len(goErrs) == 0) != (len(crdErrs) == 0) {
		t.Fatalf("RdmaPool.Validate: %v; the CRD: %v", goErrs.ToAggregate(), crdErrs.ToAggregate())
	}
	for _, e := range goErrs {
		if !strings.Contains(crdErrs.ToAggregate().Error(), e.Detail) {
			t.Errorf("RdmaPool.Validate says %q, the CRD %v", e.Detail, crdErrs.ToAggregate())
		}
	}
}

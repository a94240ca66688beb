package validation

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/resource"
	_ "k8s.io/kubernetes/pkg/apis/resource/install" // registers resource.k8s.io in legacyscheme
	"k8s.io/kubernetes/pkg/features"
	"k8s.io/kubernetes/pkg/registry/resource/resourceslice"
	kjson "sigs.k8s.io/json"
)

// cluster is a set of feature gates the API server runs with.
type cluster struct {
	name  string
	gates featuregatetesting.FeatureOverrides
}

var (
	// modern is what the default model needs: partitionable devices (counters),
	// consumable capacity (multi-allocation, request policies) and device taints.
	modern = cluster{name: "modern", gates: featuregatetesting.FeatureOverrides{
		features.DRAPartitionableDevices: true,
		features.DRAConsumableCapacity:   true,
		features.DRADeviceTaints:         true,
	}}
	// older is a cluster where the legacy model is the right one: no counters, no
	// multi-allocation. Taints stay on: the gate is GA at this version.
	older = cluster{name: "older", gates: featuregatetesting.FeatureOverrides{
		features.DRAPartitionableDevices: false,
		features.DRAConsumableCapacity:   false,
		features.DRADeviceTaints:         true,
	}}
)

// apply sets the cluster's gates for the rest of the test.
func (c cluster) apply(t *testing.T) {
	t.Helper()
	featuregatetesting.SetFeatureGatesDuringTest(t, utilfeature.DefaultFeatureGate, c.gates)
}

// serverResult is what the API server would make of a create request.
type serverResult struct {
	// dropped describes the fields PrepareForCreate removed because their feature is
	// off; empty when the slice was stored as sent.
	dropped string
	// errs are the validation errors with declarative validation as the server runs
	// it at this version's defaults.
	errs field.ErrorList
	// strictErrs are the errors with every declarative rule enforced, including alpha
	// and beta ones the server only shadows today: tomorrow's validation.
	strictErrs field.ErrorList
}

// createOnServer runs a ResourceSlice through the API server's create path: JSON as
// the client sends it, strict decoding, v1 defaulting, conversion to the internal
// type, the registry strategy's field dropping, then handwritten and declarative
// validation.
func createOnServer(t *testing.T, slice *resourceapi.ResourceSlice) serverResult {
	t.Helper()
	data, err := json.Marshal(slice)
	if err != nil {
		t.Fatalf("encode %s: %v", slice.Name, err)
	}
	var decoded resourceapi.ResourceSlice
	strictErrs, err := kjson.UnmarshalStrict(data, &decoded)
	if err != nil || len(strictErrs) > 0 {
		t.Fatalf("decode %s: %v %v", slice.Name, err, strictErrs)
	}
	legacyscheme.Scheme.Default(&decoded)

	internal := &resource.ResourceSlice{}
	if err := legacyscheme.Scheme.Convert(&decoded, internal, nil); err != nil {
		t.Fatalf("convert %s: %v", slice.Name, err)
	}
	before := internal.DeepCopy()

	ctx := genericapirequest.WithRequestInfo(genericapirequest.NewContext(), &genericapirequest.RequestInfo{
		IsResourceRequest: true, Verb: "create",
		APIGroup: resourceapi.GroupName, APIVersion: "v1", Resource: "resourceslices", Name: slice.Name,
	})
	resourceslice.Strategy.PrepareForCreate(ctx, internal)
	var res serverResult
	// PrepareForCreate also sets metadata.generation; only the spec matters here.
	if !apiequality.Semantic.DeepEqual(before.Spec, internal.Spec) {
		res.dropped = cmp.Diff(before.Spec, internal.Spec)
	}
	res.errs = rest.ValidateCreate(ctx, internal, resourceslice.Strategy)
	res.strictErrs = rest.ValidateCreate(rest.WithAllDeclarativeEnforcedForTest(ctx), internal, resourceslice.Strategy)
	return res
}

// requireAccepted fails unless the server stores the slice unchanged and valid.
func requireAccepted(t *testing.T, slice *resourceapi.ResourceSlice) {
	t.Helper()
	res := createOnServer(t, slice)
	if res.dropped != "" {
		t.Errorf("slice %s: the API server drops fields (-sent +stored):\n%s", slice.Name, res.dropped)
	}
	for _, e := range res.errs {
		t.Errorf("slice %s: %v", slice.Name, e)
	}
	for _, e := range res.strictErrs {
		t.Errorf("slice %s (all declarative rules enforced): %v", slice.Name, e)
	}
}

func describe(errs field.ErrorList) string {
	if len(errs) == 0 {
		return "no errors"
	}
	return fmt.Sprint(errs.ToAggregate())
}

// Package webhook is the controller's validating admission webhook: it checks the
// RdmaConfig opaque parameters of this driver in ResourceClaims, ResourceClaimTemplates,
// DeviceClasses and RdmaPools before they are stored, with the same decoder and
// validation the kubelet plugin applies at prepare time, so that a mistake shows up at
// kubectl apply instead of as a pod stuck in ContainerCreating.
package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// Path is where the webhook is served.
const Path = "/validate"

// MaxBody bounds an AdmissionReview to what the API server can send: it refuses request
// bodies over 3 MiB (its MaxRequestBodyBytes), and the review of an UPDATE carries the
// new object and the stored old one, each at most that, plus the request's metadata.
// The server reads at most this much of a body, and at most BodyBudget bytes of bodies
// at once (server.go, limit.go).
const MaxBody = 2*(3<<20) + 1<<20

// Validator validates the opaque configs of one driver.
type Validator struct {
	// DriverName is the driver whose opaque parameters are RdmaConfigs.
	DriverName string
	// ValidatePool checks what of an RdmaPool needs the allocator's CEL environment (its
	// expression); nil checks only RdmaPool.Validate. The controller sets it.
	ValidatePool func(*v1alpha1.RdmaPool) field.ErrorList
	// Class returns a DeviceClass by name, for the admin limits of its config that the
	// configs of a claim must keep; nil, or a class it cannot return, leaves the limits
	// to the kubelet plugin, which enforces them at prepare either way.
	Class func(name string) (*resourceapi.DeviceClass, error)
}

// ServeHTTP answers one AdmissionReview. A request it cannot read is a 400; an object
// it cannot decode is denied with the decoder's message, like the API server would.
func (v *Validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBody+1))
	if err != nil || len(body) > MaxBody {
		http.Error(w, "read AdmissionReview: too large or unreadable", http.StatusBadRequest)
		return
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("decode AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	resp := v.Review(review.Request)
	if !resp.Allowed {
		logger.V(2).Info("Denied", "kind", review.Request.Kind.Kind, "namespace", review.Request.Namespace,
			"name", review.Request.Name, "reason", resp.Result.Message)
	}
	out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
	if out.APIVersion == "" {
		out.APIVersion, out.Kind = admissionv1.SchemeGroupVersion.String(), "AdmissionReview"
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(out); err != nil {
		logger.Error(err, "Write AdmissionReview response")
	}
}

// Review decides one admission request.
func (v *Validator) Review(req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return resp
	}
	errs, err := v.validate(req.Kind, req.Object.Raw)
	switch {
	case err != nil:
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadRequest, Reason: metav1.StatusReasonBadRequest, Message: err.Error()}
	case len(errs) > 0:
		resp.Allowed = false
		resp.Result = &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
			Reason: metav1.StatusReasonInvalid, Message: errs.ToAggregate().Error()}
	}
	return resp
}

// validate dispatches on the kind; kinds it does not know are allowed, so that a wider
// webhook configuration never blocks anything.
func (v *Validator) validate(kind metav1.GroupVersionKind, raw []byte) (field.ErrorList, error) {
	decode := func(into any) error {
		if err := json.Unmarshal(raw, into); err != nil {
			return fmt.Errorf("decode %s: %w", kind.Kind, err)
		}
		return nil
	}
	switch {
	case kind.Group == resourceapi.GroupName && kind.Version == "v1" && kind.Kind == "ResourceClaim":
		obj := &resourceapi.ResourceClaim{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		return v.claimConfigs(field.NewPath("spec", "devices"), &obj.Spec.Devices), nil
	case kind.Group == resourceapi.GroupName && kind.Version == "v1" && kind.Kind == "ResourceClaimTemplate":
		obj := &resourceapi.ResourceClaimTemplate{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		return v.claimConfigs(field.NewPath("spec", "spec", "devices"), &obj.Spec.Spec.Devices), nil
	case kind.Group == resourceapi.GroupName && kind.Version == "v1" && kind.Kind == "DeviceClass":
		obj := &resourceapi.DeviceClass{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		var errs field.ErrorList
		for i, c := range obj.Spec.Config {
			_, cfgErrs := v.opaque(field.NewPath("spec", "config").Index(i).Child("opaque"), c.Opaque, v1alpha1.SourceClass)
			errs = append(errs, cfgErrs...)
		}
		return errs, nil
	case kind.Group == v1alpha1.GroupName && kind.Kind == v1alpha1.RdmaPoolKind:
		obj := &v1alpha1.RdmaPool{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		errs := obj.Validate()
		if len(errs) == 0 && v.ValidatePool != nil {
			errs = v.ValidatePool(obj)
		}
		return errs, nil
	}
	return nil, nil
}

// claimConfigs validates the configs of a claim's devices (fldPath is spec.devices or
// its place in a template): each as a claim config, which may not set admin limits, and
// against the limits of the DeviceClasses of the requests it applies to.
func (v *Validator) claimConfigs(fldPath *field.Path, devices *resourceapi.DeviceClaim) field.ErrorList {
	var errs field.ErrorList
	for i, c := range devices.Config {
		path := fldPath.Child("config").Index(i).Child("opaque")
		cfg, cfgErrs := v.opaque(path, c.Opaque, v1alpha1.SourceClaim)
		errs = append(errs, cfgErrs...)
		if cfg == nil || len(cfgErrs) > 0 {
			continue
		}
		errs = append(errs, v.classLimits(path.Child("parameters"), cfg, classesOf(devices.Requests, c.Requests))...)
	}
	return errs
}

// opaque decodes and validates one opaque config if it is this driver's; it returns the
// config when it decoded.
func (v *Validator) opaque(fldPath *field.Path, c *resourceapi.OpaqueDeviceConfiguration, source v1alpha1.ConfigSource) (*v1alpha1.RdmaConfig, field.ErrorList) {
	if c == nil || c.Driver != v.DriverName {
		return nil, nil
	}
	path := fldPath.Child("parameters")
	cfg, err := v1alpha1.DecodeBoundedConfig(c.Parameters.Raw)
	if err != nil {
		return nil, field.ErrorList{field.Invalid(path, truncate(string(c.Parameters.Raw)), err.Error())}
	}
	errs := cfg.ValidateFor(path, source)
	return cfg, errs
}

// classLimits checks cfg against the admin limits of each named DeviceClass.
func (v *Validator) classLimits(fldPath *field.Path, cfg *v1alpha1.RdmaConfig, classes []string) field.ErrorList {
	if v.Class == nil {
		return nil
	}
	var errs field.ErrorList
	for _, name := range classes {
		class, err := v.Class(name)
		if err != nil || class == nil {
			continue // the scheduler refuses a request of a class that does not exist
		}
		var configs []*v1alpha1.RdmaConfig
		for _, c := range class.Spec.Config {
			if c.Opaque == nil || c.Opaque.Driver != v.DriverName {
				continue
			}
			if cc, err := v1alpha1.DecodeBoundedConfig(c.Opaque.Parameters.Raw); err == nil {
				configs = append(configs, cc)
			}
		}
		for _, e := range v1alpha1.ExceedsLimits(fldPath, cfg, configs) {
			e.Detail += fmt.Sprintf(" (DeviceClass %s)", name)
			errs = append(errs, e)
		}
	}
	return errs
}

// classesOf returns the DeviceClasses of the requests a config applies to: requests
// names them (a request, or a subrequest as <request>/<subrequest>); empty is all.
func classesOf(requests []resourceapi.DeviceRequest, names []string) []string {
	applies := func(request, sub string) bool {
		if len(names) == 0 {
			return true
		}
		for _, n := range names {
			if n == request || (sub != "" && n == request+"/"+sub) {
				return true
			}
		}
		return false
	}
	seen := map[string]bool{}
	var out []string
	add := func(class string) {
		if class != "" && !seen[class] {
			seen[class] = true
			out = append(out, class)
		}
	}
	for _, r := range requests {
		if r.Exactly != nil && applies(r.Name, "") {
			add(r.Exactly.DeviceClassName)
		}
		for _, s := range r.FirstAvailable {
			if applies(r.Name, s.Name) {
				add(s.DeviceClassName)
			}
		}
	}
	return out
}

// truncate keeps a quoted value short in a message: a config is at most 10 KiB, the
// message need not repeat all of it.
func truncate(s string) string {
	const limit = 512
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "..."
}

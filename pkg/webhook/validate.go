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

// maxBody bounds an AdmissionReview; the API server's own limit for an object is 3 MiB.
const maxBody = 4 << 20

// Validator validates the opaque configs of one driver.
type Validator struct {
	// DriverName is the driver whose opaque parameters are RdmaConfigs.
	DriverName string
}

// ServeHTTP answers one AdmissionReview. A request it cannot read is a 400; an object
// it cannot decode is denied with the decoder's message, like the API server would.
func (v *Validator) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	if r.Method != http.MethodPost {
		http.Error(w, "POST an admission.k8s.io/v1 AdmissionReview", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err != nil || len(body) > maxBody {
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
		return v.claimConfigs(field.NewPath("spec", "devices", "config"), obj.Spec.Devices.Config), nil
	case kind.Group == resourceapi.GroupName && kind.Version == "v1" && kind.Kind == "ResourceClaimTemplate":
		obj := &resourceapi.ResourceClaimTemplate{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		return v.claimConfigs(field.NewPath("spec", "spec", "devices", "config"), obj.Spec.Spec.Devices.Config), nil
	case kind.Group == resourceapi.GroupName && kind.Version == "v1" && kind.Kind == "DeviceClass":
		obj := &resourceapi.DeviceClass{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		var errs field.ErrorList
		for i, c := range obj.Spec.Config {
			errs = append(errs, v.opaque(field.NewPath("spec", "config").Index(i).Child("opaque"), c.Opaque)...)
		}
		return errs, nil
	case kind.Group == v1alpha1.GroupName && kind.Kind == v1alpha1.RdmaPoolKind:
		obj := &v1alpha1.RdmaPool{}
		if err := decode(obj); err != nil {
			return nil, err
		}
		return obj.Validate(), nil
	}
	return nil, nil
}

func (v *Validator) claimConfigs(fldPath *field.Path, configs []resourceapi.DeviceClaimConfiguration) field.ErrorList {
	var errs field.ErrorList
	for i, c := range configs {
		errs = append(errs, v.opaque(fldPath.Index(i).Child("opaque"), c.Opaque)...)
	}
	return errs
}

// opaque validates one opaque config if it is this driver's.
func (v *Validator) opaque(fldPath *field.Path, c *resourceapi.OpaqueDeviceConfiguration) field.ErrorList {
	if c == nil || c.Driver != v.DriverName {
		return nil
	}
	return v1alpha1.ValidateConfigBytes(fldPath.Child("parameters"), c.Parameters.Raw)
}

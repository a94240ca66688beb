package claimgen

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
)

// ValidateObject checks a ResourceClaimTemplate or ResourceClaim against what the API
// server (resource.k8s.io/v1, Kubernetes 1.37) refuses on create and what the allocator
// can never satisfy, with field paths. The driver's module does not depend on
// k8s.io/kubernetes, whose validation this restates for the fields a claim of this
// package has: names, list sizes and references, attribute names, CEL (compiled as the
// API server compiles a new expression, by the controller's CompileSelector), and the
// allocator's limit on the devices of one claim. Opaque configs, tolerations, capacity
// and derived attributes are not written here and not checked.
func ValidateObject(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *resourceapi.ResourceClaimTemplate:
		errs := validateMeta(o.Name, o.Namespace, field.NewPath("metadata"))
		return append(errs, ValidateClaimSpec(&o.Spec.Spec, field.NewPath("spec", "spec"))...)
	case *resourceapi.ResourceClaim:
		errs := validateMeta(o.Name, o.Namespace, field.NewPath("metadata"))
		return append(errs, ValidateClaimSpec(&o.Spec, field.NewPath("spec"))...)
	}
	return field.ErrorList{field.InternalError(nil, fmt.Errorf("%T is neither a ResourceClaimTemplate nor a ResourceClaim", obj))}
}

func validateMeta(name, namespace string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath.Child("name"), name, msg))
	}
	if namespace != "" {
		for _, msg := range validation.IsDNS1123Label(namespace) {
			errs = append(errs, field.Invalid(fldPath.Child("namespace"), namespace, msg))
		}
	}
	return errs
}

// ValidateClaimSpec checks a claim's spec; see ValidateObject.
func ValidateClaimSpec(spec *resourceapi.ResourceClaimSpec, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	devPath := fldPath.Child("devices")
	reqPath := devPath.Child("requests")
	d := &spec.Devices
	if len(d.Requests) > resourceapi.DeviceRequestsMaxSize {
		errs = append(errs, field.TooMany(reqPath, len(d.Requests), resourceapi.DeviceRequestsMaxSize))
	}
	names := sets.New[string]()
	devices := 0
	for i, r := range d.Requests {
		p := reqPath.Index(i)
		errs = append(errs, dnsLabel(r.Name, p.Child("name"))...)
		if names.Has(r.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), r.Name))
		}
		names.Insert(r.Name)
		switch {
		case r.Exactly != nil && len(r.FirstAvailable) == 0:
			n, e := validateExactly(r.Exactly, p.Child("exactly"))
			devices += n
			errs = append(errs, e...)
		case r.Exactly == nil && len(r.FirstAvailable) > 0:
			// The allocator reserves room for the largest alternative.
			largest := 0
			for j, s := range r.FirstAvailable {
				sp := p.Child("firstAvailable").Index(j)
				errs = append(errs, dnsLabel(s.Name, sp.Child("name"))...)
				errs = append(errs, validateClass(s.DeviceClassName, sp.Child("deviceClassName"))...)
				errs = append(errs, validateSelectors(s.Selectors, sp.Child("selectors"))...)
				n, e := validateCount(s.AllocationMode, s.Count, sp)
				largest = max(largest, n)
				errs = append(errs, e...)
			}
			devices += largest
		default:
			errs = append(errs, field.Required(p, "exactly one of `exactly` or `firstAvailable` is required"))
		}
	}
	if devices > resourceapi.AllocationResultsMaxSize {
		errs = append(errs, field.Invalid(reqPath, devices,
			fmt.Sprintf("the requests ask for %d devices; the allocator gives one claim at most %d", devices, resourceapi.AllocationResultsMaxSize)))
	}

	conPath := devPath.Child("constraints")
	if len(d.Constraints) > resourceapi.DeviceConstraintsMaxSize {
		errs = append(errs, field.TooMany(conPath, len(d.Constraints), resourceapi.DeviceConstraintsMaxSize))
	}
	for i, c := range d.Constraints {
		errs = append(errs, validateConstraint(c, names, conPath.Index(i))...)
	}
	if len(d.Config) > resourceapi.DeviceConfigMaxSize {
		errs = append(errs, field.TooMany(devPath.Child("config"), len(d.Config), resourceapi.DeviceConfigMaxSize))
	}
	return errs
}

// validateExactly returns the number of devices the request asks for (0 for All, whose
// number the allocator learns from the slices) and what is wrong with it.
func validateExactly(r *resourceapi.ExactDeviceRequest, fldPath *field.Path) (int, field.ErrorList) {
	errs := validateClass(r.DeviceClassName, fldPath.Child("deviceClassName"))
	errs = append(errs, validateSelectors(r.Selectors, fldPath.Child("selectors"))...)
	n, e := validateCount(r.AllocationMode, r.Count, fldPath)
	return n, append(errs, e...)
}

// validateCount checks the allocation mode and count as the API defaults them: an empty
// mode is ExactCount, a count of 0 with it is 1.
func validateCount(mode resourceapi.DeviceAllocationMode, count int64, fldPath *field.Path) (int, field.ErrorList) {
	switch mode {
	case "", resourceapi.DeviceAllocationModeExactCount:
		switch {
		case count == 0:
			return 1, nil
		case count < 0:
			return 0, field.ErrorList{field.Invalid(fldPath.Child("count"), count, "must be greater than zero")}
		}
		return int(count), nil
	case resourceapi.DeviceAllocationModeAll:
		if count != 0 {
			return 0, field.ErrorList{field.Invalid(fldPath.Child("count"), count, "must not be specified when allocationMode is 'All'")}
		}
		return 0, nil
	}
	return 0, field.ErrorList{field.NotSupported(fldPath.Child("allocationMode"), mode,
		[]resourceapi.DeviceAllocationMode{resourceapi.DeviceAllocationModeAll, resourceapi.DeviceAllocationModeExactCount})}
}

func validateClass(name string, fldPath *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Subdomain(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func validateSelectors(selectors []resourceapi.DeviceSelector, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(selectors) > resourceapi.DeviceSelectorsMaxSize {
		errs = append(errs, field.TooMany(fldPath, len(selectors), resourceapi.DeviceSelectorsMaxSize))
	}
	for i, s := range selectors {
		p := fldPath.Index(i).Child("cel")
		if s.CEL == nil {
			errs = append(errs, field.Required(p, ""))
			continue
		}
		if _, err := controller.CompileSelector(s.CEL.Expression); err != nil {
			errs = append(errs, field.Invalid(p.Child("expression"), s.CEL.Expression, err.Error()))
		}
	}
	return errs
}

func validateConstraint(c resourceapi.DeviceConstraint, requests sets.Set[string], fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	reqPath := fldPath.Child("requests")
	if len(c.Requests) > resourceapi.DeviceRequestsMaxSize {
		errs = append(errs, field.TooMany(reqPath, len(c.Requests), resourceapi.DeviceRequestsMaxSize))
	}
	seen := sets.New[string]()
	for i, r := range c.Requests {
		// A subrequest is named <request>/<subrequest>; this package writes none, so
		// only the request part is resolved.
		main, _, _ := strings.Cut(r, "/")
		if !requests.Has(main) {
			errs = append(errs, field.Invalid(reqPath.Index(i), r, "must be the name of a request in the claim"))
		}
		if seen.Has(r) {
			errs = append(errs, field.Duplicate(reqPath.Index(i), r))
		}
		seen.Insert(r)
	}
	switch {
	case c.MatchAttribute != nil && c.DistinctAttribute != nil:
		errs = append(errs, field.Invalid(fldPath, "", "exactly one of matchAttribute or distinctAttribute is allowed"))
	case c.MatchAttribute != nil:
		errs = append(errs, fullyQualifiedName(string(*c.MatchAttribute), fldPath.Child("matchAttribute"))...)
	case c.DistinctAttribute != nil:
		errs = append(errs, fullyQualifiedName(string(*c.DistinctAttribute), fldPath.Child("distinctAttribute"))...)
	default:
		errs = append(errs, field.Required(fldPath, "exactly one of matchAttribute or distinctAttribute is required"))
	}
	return errs
}

// fullyQualifiedName checks <domain>/<id>: the domain a DNS subdomain (in any case) of
// at most resourceapi.DriverNameMaxLength bytes, the ID a C identifier of at most
// resourceapi.DeviceMaxIDLength.
func fullyQualifiedName(name string, fldPath *field.Path) field.ErrorList {
	domain, id, ok := strings.Cut(name, "/")
	if !ok || domain == "" || id == "" {
		return field.ErrorList{field.Invalid(fldPath, name, "a fully qualified name must be a domain and a name separated by a slash")}
	}
	var errs field.ErrorList
	if len(domain) > resourceapi.DriverNameMaxLength {
		errs = append(errs, field.TooLong(fldPath, name, resourceapi.DriverNameMaxLength))
	}
	// Domains are compared caseless, as driver names.
	for _, msg := range validation.IsDNS1123Subdomain(strings.ToLower(domain)) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	if len(id) > resourceapi.DeviceMaxIDLength {
		errs = append(errs, field.TooLong(fldPath, name, resourceapi.DeviceMaxIDLength))
	}
	for _, msg := range content.IsCIdentifier(id) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

func dnsLabel(name string, fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(fldPath, name, msg))
	}
	return errs
}

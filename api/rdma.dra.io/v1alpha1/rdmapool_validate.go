package v1alpha1

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
)

// LinkTypes lists every accepted spelling of a link type, in the order of the CRD's enum
// (TestCRDMatchesTypes compares them).
var LinkTypes = []LinkType{"InfiniBand", "Ethernet", "infiniband", "ethernet", "IB", "ETH", "ib", "eth", "ether"}

// LinkLayer returns the kernel's name of the link layer t names, InfiniBand or Ethernet
// (the values of the rdma.dra.io/link_layer attribute), and false for anything else. It
// takes exactly the spellings of LinkTypes, as the CRD's enum does, so that the webhook,
// the controller and the node configuration accept what the API server accepts.
func (t LinkType) LinkLayer() (string, bool) {
	switch t {
	case "InfiniBand", "infiniband", "IB", "ib":
		return "InfiniBand", true
	case "Ethernet", "ethernet", "ETH", "eth", "ether":
		return "Ethernet", true
	}
	return "", false
}

// The messages of the rules of a legacy pool, the same in the CRD's rules
// (rdmapool_types.go) and in Validate.
const (
	legacyNameMessage      = "must be a DNS label of at most 56 characters in legacy mode: each node publishes the pool's device as legacy-<name>, which must be a DNS label"
	legacySelectorsMessage = "must be empty in legacy mode: the node configuration's legacyResources entry named after the pool selects its ports"
	legacyNetworkMessage   = "must not be set in legacy mode: a legacy pool's device stands for several ports and has no single netdev to attach"
)

// Validate checks what the CRD schema cannot: shell patterns, the extended resource
// name and the config, which must decode strictly as an RdmaConfig; and, for the
// webhook and the controller, the CRD's rules of a legacy pool (a name that makes a
// device name, no selectors) and that its config attaches no network. The CEL
// expression is compiled by the controller, which knows the allocator's environment.
// Errors carry field paths (spec.selectors.ifNames[0]).
func (p *RdmaPool) Validate() field.ErrorList {
	var errs field.ErrorList
	name := field.NewPath("metadata", "name")
	if msgs := validation.IsDNS1123Subdomain(p.Name); len(msgs) > 0 {
		errs = append(errs, field.Invalid(name, p.Name, strings.Join(msgs, "; ")))
	}
	spec := field.NewPath("spec")
	if !slices.Contains(PoolModes, p.Spec.Mode) {
		errs = append(errs, field.NotSupported(spec.Child("mode"), p.Spec.Mode, PoolModes))
	}
	legacy := p.Spec.Mode == PoolModeLegacy
	if legacy {
		if len(p.Name) > MaxLegacyPoolNameLength || len(validation.IsDNS1123Label(p.Name)) > 0 {
			errs = append(errs, field.Invalid(name, p.Name, legacyNameMessage))
		}
		if !p.Spec.Selectors.Empty() {
			errs = append(errs, field.Forbidden(spec.Child("selectors"), legacySelectorsMessage))
		}
	}
	errs = append(errs, p.Spec.Selectors.validate(spec.Child("selectors"))...)
	if len(p.Spec.CEL) > MaxCELLength {
		errs = append(errs, field.TooLong(spec.Child("cel"), "", MaxCELLength))
	}
	if n := p.Spec.ExtendedResourceName; n != nil {
		if msg := checkExtendedResourceName(*n); msg != "" {
			errs = append(errs, field.Invalid(spec.Child("extendedResourceName"), *n, msg))
		}
	}
	if p.Spec.Config != nil {
		errs = append(errs, ValidateConfigBytes(spec.Child("config"), p.Spec.Config.Raw)...)
		if legacy {
			errs = append(errs, legacyConfig(spec.Child("config"), p.Spec.Config.Raw)...)
		}
	}
	return errs
}

// legacyConfig refuses what a legacy pool's config (at fldPath) cannot have: a
// network to attach, or a grant that lets claims ask for one. Without either, a claim of
// the pool's class may attach nothing (NetworkPolicy).
func legacyConfig(fldPath *field.Path, raw []byte) field.ErrorList {
	cfg, err := DecodeBoundedConfig(raw)
	if err != nil {
		return nil // ValidateConfigBytes reports it
	}
	var errs field.ErrorList
	if cfg.Network != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("network"), legacyNetworkMessage))
	}
	if cfg.AllowedNetwork != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("allowedNetwork"), legacyNetworkMessage))
	}
	return errs
}

// ValidateConfigBytes decodes raw as an RdmaConfig and validates it; every problem is
// reported at fldPath, the place of the config in its object.
func ValidateConfigBytes(fldPath *field.Path, raw []byte) field.ErrorList {
	cfg, err := DecodeBoundedConfig(raw)
	if err != nil {
		// The document may be long (DecodeBoundedConfig refuses it then): quote its start only.
		quoted := string(raw)
		if len(quoted) > 512 {
			quoted = quoted[:512] + "..."
		}
		return field.ErrorList{field.Invalid(fldPath, quoted, err.Error())}
	}
	return cfg.Validate(fldPath)
}

// Empty reports whether the selectors select every port: no values, and no minimum
// speed above 0. A legacy pool's selectors must be empty.
func (s *PoolSelectors) Empty() bool {
	return len(s.Vendors) == 0 && len(s.DeviceIDs) == 0 && len(s.Drivers) == 0 && len(s.IfNames) == 0 &&
		len(s.IBDevs) == 0 && len(s.LinkTypes) == 0 && len(s.PCIAddresses) == 0 &&
		(s.MinSpeedGbps == nil || *s.MinSpeedGbps == 0)
}

func (s *PoolSelectors) validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	each := func(name string, values []string, check func(string) string) {
		if len(values) > MaxSelectorValues {
			errs = append(errs, field.TooMany(fldPath.Child(name), len(values), MaxSelectorValues))
		}
		for i, v := range values {
			p := fldPath.Child(name).Index(i)
			switch {
			case v == "":
				errs = append(errs, field.Required(p, "must not be empty"))
			case len(v) > MaxSelectorValueLength:
				errs = append(errs, field.TooLong(p, "", MaxSelectorValueLength))
			case !printableASCII(v):
				errs = append(errs, field.Invalid(p, v, "must be printable ASCII"))
			default:
				if msg := check(v); msg != "" {
					errs = append(errs, field.Invalid(p, v, msg))
				}
			}
		}
	}
	each("vendors", s.Vendors, selectorcheck.HexID)
	each("deviceIDs", s.DeviceIDs, selectorcheck.HexID)
	each("drivers", s.Drivers, func(string) string { return "" })
	each("ifNames", s.IfNames, selectorcheck.Pattern)
	each("ibdevs", s.IBDevs, selectorcheck.Pattern)
	each("pciAddresses", s.PCIAddresses, selectorcheck.Pattern)
	for i, t := range s.LinkTypes {
		if _, ok := t.LinkLayer(); !ok {
			errs = append(errs, field.NotSupported(fldPath.Child("linkTypes").Index(i), t, LinkTypes))
		}
	}
	if s.MinSpeedGbps != nil && *s.MinSpeedGbps < 0 {
		errs = append(errs, field.Invalid(fldPath.Child("minSpeedGbps"), *s.MinSpeedGbps, "must be 0 or more"))
	}
	return errs
}

// printableASCII keeps selector values plain, so that they quote into CEL without
// surprises and match attribute values, which are ASCII.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// checkExtendedResourceName applies the rules of the API server for an extended resource
// name: a qualified name with a domain outside kubernetes.io, usable after "requests.".
func checkExtendedResourceName(name string) string {
	domain, _, ok := strings.Cut(name, "/")
	switch {
	case !ok:
		return "must be <domain>/<name>, e.g. rdma/hca_shared_devices_a"
	case domain == "kubernetes.io" || strings.HasSuffix(domain, ".kubernetes.io"):
		return "must not be in the kubernetes.io domain"
	}
	if msgs := validation.IsQualifiedName(name); len(msgs) > 0 {
		return strings.Join(msgs, "; ")
	}
	if msgs := validation.IsQualifiedName("requests." + name); len(msgs) > 0 {
		return fmt.Sprintf("%q must be a valid resource quota name: %s", "requests."+name, strings.Join(msgs, "; "))
	}
	return ""
}

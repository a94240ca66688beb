package nodeconfig

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
)

// Validate checks a defaulted configuration and reports every problem with its field
// path (include[0].vendors[1]). Call SetDefaults first: zero values are errors here.
func (c *Config) Validate() field.ErrorList {
	var errs field.ErrorList
	if c.Version != Version {
		errs = append(errs, field.NotSupported(field.NewPath("version"), c.Version, []string{Version}))
	}
	switch c.Modes {
	case ModesBoth, ModesExclusive, ModesShared:
	default:
		errs = append(errs, field.NotSupported(field.NewPath("modes"), c.Modes,
			[]Modes{ModesBoth, ModesExclusive, ModesShared}))
	}
	if c.Shares < 1 || c.Shares > MaxShares {
		errs = append(errs, field.Invalid(field.NewPath("shares"), c.Shares,
			fmt.Sprintf("must be between 1 and %d", MaxShares)))
	}
	legacy := field.NewPath("legacy")
	switch c.Legacy.Mode {
	case LegacyModeExclusive, LegacyModeShared:
	default:
		errs = append(errs, field.NotSupported(legacy.Child("mode"), c.Legacy.Mode,
			[]LegacyMode{LegacyModeExclusive, LegacyModeShared}))
	}
	if c.Legacy.Shares < 1 || c.Legacy.Shares > MaxLegacyShares {
		errs = append(errs, field.Invalid(legacy.Child("shares"), c.Legacy.Shares,
			fmt.Sprintf("must be between 1 and %d", MaxLegacyShares)))
	}
	for i := range c.Include {
		errs = append(errs, c.Include[i].validate(field.NewPath("include").Index(i))...)
	}
	for i := range c.Exclude {
		errs = append(errs, c.Exclude[i].validate(field.NewPath("exclude").Index(i))...)
	}
	errs = append(errs, c.validateLegacyResources()...)
	errs = append(errs, c.validateNetwork()...)
	errs = append(errs, c.validateFabric()...)
	errs = append(errs, c.validateHealth()...)
	return errs
}

func (s *Selector) validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	each := func(name string, values []string, check func(string) string) {
		for i, v := range values {
			p := fldPath.Child(name).Index(i)
			if v == "" {
				errs = append(errs, field.Required(p, "must not be empty"))
				continue
			}
			if msg := check(v); msg != "" {
				errs = append(errs, field.Invalid(p, v, msg))
			}
		}
	}
	each("vendors", s.Vendors, selectorcheck.HexID)
	each("deviceIDs", s.DeviceIDs, selectorcheck.HexID)
	each("drivers", s.Drivers, func(string) string { return "" })
	each("ibdevs", s.IBDevs, selectorcheck.Pattern)
	each("ifNames", s.IfNames, selectorcheck.Pattern)
	each("pciAddresses", s.PCIAddresses, selectorcheck.Pattern)
	for i, v := range s.LinkTypes {
		// Exactly the spellings of an RdmaPool's linkTypes (the CRD's enum), so that a link
		// type written in a pool is valid here and the other way round.
		if _, ok := v1alpha1.LinkType(v).LinkLayer(); !ok {
			errs = append(errs, field.NotSupported(fldPath.Child("linkTypes").Index(i), v, v1alpha1.LinkTypes))
		}
	}
	return errs
}

// normalize spells hex IDs and link types the way discovery does.
func (s *Selector) normalize() {
	for i, v := range s.Vendors {
		s.Vendors[i] = selectorcheck.NormalizeHexID(v)
	}
	for i, v := range s.DeviceIDs {
		s.DeviceIDs[i] = selectorcheck.NormalizeHexID(v)
	}
	for i, v := range s.LinkTypes {
		if l, ok := v1alpha1.LinkType(v).LinkLayer(); ok {
			s.LinkTypes[i] = l
		}
	}
}

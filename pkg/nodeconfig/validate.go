package nodeconfig

import (
	"fmt"
	"regexp"
	"strings"

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
	errs = append(errs, c.validateRails()...)
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
	each("portGUIDs", s.PortGUIDs, checkPortGUID)
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
	for i, v := range s.PortGUIDs {
		s.PortGUIDs[i] = normalizePortGUID(v)
	}
}

// isEmpty reports whether the selector sets no field, so that it matches every port.
func (s *Selector) isEmpty() bool {
	return len(s.Vendors) == 0 && len(s.DeviceIDs) == 0 && len(s.Drivers) == 0 && len(s.IBDevs) == 0 &&
		len(s.IfNames) == 0 && len(s.LinkTypes) == 0 && len(s.PCIAddresses) == 0 && len(s.PortGUIDs) == 0
}

// Port GUIDs as discovery spells them (the notation of node_guid in sysfs) and as ibstat
// prints them, after normalizePortGUID has lower-cased the entry.
var (
	portGUIDRE       = regexp.MustCompile(`^[0-9a-f]{4}(:[0-9a-f]{4}){3}$`)
	ibstatPortGUIDRE = regexp.MustCompile(`^0x[0-9a-f]{16}$`)
)

// normalizePortGUID spells a portGUIDs entry the way discovery does: lower case, and a
// whole GUID written as ibstat prints it (0x7c8c090300c3cfee) in groups of four hex
// digits (7c8c:0903:00c3:cfee). Patterns keep their form.
func normalizePortGUID(v string) string {
	v = strings.ToLower(v)
	if ibstatPortGUIDRE.MatchString(v) {
		h := v[2:]
		return h[0:4] + ":" + h[4:8] + ":" + h[8:12] + ":" + h[12:16]
	}
	return v
}

// checkPortGUID returns what is wrong with a normalized portGUIDs entry. Beyond the
// pattern syntax, a name without wildcards must be a whole GUID: a GUID in another
// notation, or cut short, would silently match no port.
func checkPortGUID(v string) string {
	if msg := selectorcheck.Pattern(v); msg != "" {
		return msg
	}
	switch {
	case strings.HasPrefix(v, "0x"):
		return "a pattern must use the notation of sysfs, e.g. 7c8c:0903:*; only a whole GUID may be written as ibstat prints it, 0x7c8c090300c3cfee"
	case !isPattern(v) && !portGUIDRE.MatchString(v):
		return "must be a port GUID, 7c8c:0903:00c3:cfee or 0x7c8c090300c3cfee, or a shell pattern"
	}
	return ""
}

// isPattern reports whether a selector entry has wildcards (or escapes), as opposed to a
// name that matches only itself.
func isPattern(v string) bool {
	return strings.ContainsAny(v, `*?[\`)
}

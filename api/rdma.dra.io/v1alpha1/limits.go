package v1alpha1

import (
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds of a config, applied before anything is parsed, so that the time and memory a
// hostile document costs stay proportional to these numbers and not to its length.
const (
	// MaxConfigBytes bounds a whole config document: the API server's limit of opaque
	// parameters in claims and classes. A pool's config becomes such parameters too.
	MaxConfigBytes = resourceapi.OpaqueParametersMaxLength
	// MaxScalarLength bounds every scalar field (charDevices, gidIndex, memlock and the
	// limits): the longest valid value, 9223372036854775807, has 19 characters.
	MaxScalarLength = 64
)

// DecodeBoundedConfig is DecodeConfig for a document from outside (an admission
// review, a pool): one longer than MaxConfigBytes is refused before it is decoded.
func DecodeBoundedConfig(raw []byte) (*RdmaConfig, error) {
	if len(raw) > MaxConfigBytes {
		return nil, fmt.Errorf("decode RdmaConfig: document is %d bytes long, at most %d are allowed", len(raw), MaxConfigBytes)
	}
	return DecodeConfig(raw)
}

// ConfigSource says where a config comes from: its class or its claim. The admin limits
// (AllowedCharDevices, MaxMemlock, AllowedNetwork, AllowedFabric) may only come from a
// class.
type ConfigSource string

// The sources of a config.
const (
	// SourceClass is a DeviceClass's config, an RdmaPool's config among them.
	SourceClass ConfigSource = "DeviceClass"
	// SourceClaim is a ResourceClaim's (or its template's) config.
	SourceClaim ConfigSource = "claim"
)

// ValidateFor validates c as a config from source: Validate, and for a claim, no admin
// limits, which only the class may set.
func (c *RdmaConfig) ValidateFor(fldPath *field.Path, source ConfigSource) field.ErrorList {
	errs := c.Validate(fldPath)
	if source != SourceClaim {
		return errs
	}
	const msg = "is an admin limit: only a DeviceClass config may set it"
	if c.AllowedCharDevices != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("allowedCharDevices"), msg))
	}
	if c.MaxMemlock != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("maxMemlock"), msg))
	}
	if c.AllowedNetwork != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("allowedNetwork"), msg))
	}
	if c.AllowedFabric != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("allowedFabric"), msg))
	}
	if c.Network != nil && c.Network.KeepHostAddress != nil {
		errs = append(errs, field.Forbidden(fldPath.Child("network", "keepHostAddress"),
			"moves the node's own addresses into the pod: only a DeviceClass config may set it"))
	}
	return errs
}

// setsAdminField reports whether a claim config sets a field that only a class may set.
func (c *RdmaConfig) setsAdminField() bool {
	return c.AllowedCharDevices != nil || c.MaxMemlock != nil || c.AllowedNetwork != nil || c.AllowedFabric != nil ||
		(c.Network != nil && c.Network.KeepHostAddress != nil)
}

// validateLimits checks the limit fields' values and, within one config, that the
// config's own values respect its limits.
func (c *RdmaConfig) validateLimits(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.AllowedCharDevices != nil {
		errs = append(errs, validateCharDevices(fldPath.Child("allowedCharDevices"), *c.AllowedCharDevices)...)
	}
	if c.MaxMemlock != nil {
		errs = append(errs, validateMemlock(fldPath.Child("maxMemlock"), *c.MaxMemlock)...)
	}
	if c.AllowedNetwork != nil {
		errs = append(errs, c.AllowedNetwork.validate(fldPath.Child("allowedNetwork"))...)
	}
	if c.AllowedFabric != nil {
		errs = append(errs, c.AllowedFabric.validate(fldPath.Child("allowedFabric"))...)
	}
	if len(errs) > 0 {
		return errs
	}
	return c.exceeded(fldPath, c)
}

// exceeded reports the values of c that exceed the limits of limits, at fldPath.
// Invalid values are left to Validate.
func (c *RdmaConfig) exceeded(fldPath *field.Path, limits *RdmaConfig) field.ErrorList {
	var errs field.ErrorList
	if a, s := limits.AllowedCharDevices, c.CharDevices; a != nil && s != nil && isCharDeviceSet(*a) && isCharDeviceSet(*s) && !a.Includes(*s) {
		errs = append(errs, field.Forbidden(fldPath.Child("charDevices"),
			fmt.Sprintf("%q exceeds the DeviceClass's allowedCharDevices %q", *s, *a)))
	}
	if m, p := limits.MaxMemlock, c.Memlock; m != nil && p != nil && !m.Allows(*p) {
		errs = append(errs, field.Forbidden(fldPath.Child("memlock"),
			fmt.Sprintf("%q exceeds the DeviceClass's maxMemlock %q", *p, *m)))
	}
	return errs
}

// Includes reports whether set s contains every device of set o (the sets are nested:
// verbs, diagnostics, management).
func (s CharDeviceSet) Includes(o CharDeviceSet) bool {
	return slices.Index(charDeviceSets, o) <= slices.Index(charDeviceSets, s)
}

// Allows reports whether a claim may ask for memlock p under the limit m: unlimited
// allows everything, unset only unset, a number of bytes unset and anything up to it.
// An invalid p or m allows nothing but unset.
func (m MemlockPolicy) Allows(p MemlockPolicy) bool {
	switch {
	case p == MemlockUnset || m == MemlockUnlimited:
		return true
	case p == MemlockUnlimited:
		return false
	}
	limit, ok := m.Bytes()
	if !ok {
		return false
	}
	n, ok := p.Bytes()
	return ok && n <= limit
}

// DefaultCharDevices is the set a device gets when no config sets one. A shared port
// gets verbs only: umad lets a container send management datagrams on a port other
// tenants use. An exclusive port adds the diagnostics tools' umad.
func DefaultCharDevices(shared bool) CharDeviceSet {
	if shared {
		return CharDevicesVerbs
	}
	return CharDevicesDiagnostics
}

// Resolve returns the config of one allocated device: its class's configs, then its
// claim's, merged field by field (Merge), defaulted for the kind of device, and checked
// against the admin limits the class configs set. A claim config that sets a limit is
// refused (it must have passed ValidateFor with SourceClaim; Resolve checks again). A
// default beyond a limit is lowered to it; a value set beyond a limit is an error.
func Resolve(shared bool, class, claim []*RdmaConfig) (*RdmaConfig, error) {
	limits := mergedLimits(class)
	for _, c := range claim {
		if c != nil && c.setsAdminField() {
			return nil, fmt.Errorf("a claim config sets an admin field (allowedCharDevices, maxMemlock, allowedNetwork, allowedFabric, network.keepHostAddress), which only a DeviceClass config may set")
		}
	}
	out := Merge(append(slices.Clone(class), claim...)...)
	if !anySets(class, claim, func(c *RdmaConfig) bool { return c.CharDevices != nil }) {
		def := DefaultCharDevices(shared)
		if a := limits.AllowedCharDevices; a != nil && isCharDeviceSet(*a) && !a.Includes(def) {
			def = *a
		}
		out.CharDevices = &def
	}
	errs := out.exceeded(nil, limits)
	// The network and fabric fields the claims set (not the class's own) must fit its
	// policies.
	claims := mergedLimits(claim)
	errs = append(errs, PolicyOf(class).exceededNetwork(field.NewPath("network"), claims.Network)...)
	errs = append(errs, fabricPolicyOf(class).exceededFabric(field.NewPath("fabric"), claims.Fabric)...)
	if len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return out, nil
}

// ExceedsLimits reports the values of cfg, a claim's config, that exceed the admin limits
// the class configs set (merged in order, like Merge), at fldPath. The webhook calls it;
// Resolve applies the same rule at prepare.
func ExceedsLimits(fldPath *field.Path, cfg *RdmaConfig, class []*RdmaConfig) field.ErrorList {
	errs := cfg.exceeded(fldPath, mergedLimits(class))
	errs = append(errs, PolicyOf(class).exceededNetwork(fldPath.Child("network"), cfg.Network)...)
	return append(errs, fabricPolicyOf(class).exceededFabric(fldPath.Child("fabric"), cfg.Fabric)...)
}

// mergedLimits overlays the class configs; only the limit fields of the result are read.
func mergedLimits(class []*RdmaConfig) *RdmaConfig {
	limits := &RdmaConfig{}
	for _, c := range class {
		if c != nil {
			overlay(c, limits)
		}
	}
	return limits
}

func anySets(class, claim []*RdmaConfig, set func(*RdmaConfig) bool) bool {
	for _, cs := range [][]*RdmaConfig{class, claim} {
		for _, c := range cs {
			if c != nil && set(c) {
				return true
			}
		}
	}
	return false
}

// validateCharDevices checks one char device set value, bounded before it is quoted.
func validateCharDevices(fldPath *field.Path, s CharDeviceSet) field.ErrorList {
	switch {
	case len(s) > MaxScalarLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxScalarLength)}
	case !isCharDeviceSet(s):
		return field.ErrorList{field.NotSupported(fldPath, string(s), charDeviceSets)}
	}
	return nil
}

// validateMemlock checks one memlock policy value, bounded before it is parsed.
func validateMemlock(fldPath *field.Path, p MemlockPolicy) field.ErrorList {
	switch {
	case p == MemlockUnset || p == MemlockUnlimited:
		return nil
	case len(p) > MaxScalarLength:
		return field.ErrorList{field.TooLong(fldPath, "", MaxScalarLength)}
	}
	if _, ok := p.Bytes(); !ok {
		return field.ErrorList{field.Invalid(fldPath, string(p),
			"must be unset, unlimited or a positive whole number of bytes such as 64Gi")}
	}
	return nil
}

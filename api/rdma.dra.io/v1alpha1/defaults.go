package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Default fills every field that is still nil with its default, and the apiVersion and
// kind when they are empty. Fields that are set stay as they are, valid or not.
func (c *RdmaConfig) Default() {
	if c.APIVersion == "" {
		c.APIVersion = SchemeGroupVersion.String()
	}
	if c.Kind == "" {
		c.Kind = RdmaConfigKind
	}
	if c.CharDevices == nil {
		v := CharDevicesDiagnostics
		c.CharDevices = &v
	}
	if c.NCCLEnv == nil {
		v := true
		c.NCCLEnv = &v
	}
	if c.GIDIndex == nil {
		v := GIDIndexAuto
		c.GIDIndex = &v
	}
	if c.Memlock == nil {
		v := MemlockUnset
		c.Memlock = &v
	}
	if c.Network == nil {
		c.Network = &NetworkConfig{}
	}
	c.Network.setDefaults()
}

// Validate checks the values of the fields that are set; nil fields are valid (they take
// the class's value or the default). fldPath is where the config sits in its object,
// e.g. spec.devices.config[0].opaque.parameters; it may be nil.
func (c *RdmaConfig) Validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Every scalar is bounded before it is parsed or quoted back (limits.go).
	if c.CharDevices != nil {
		errs = append(errs, validateCharDevices(fldPath.Child("charDevices"), *c.CharDevices)...)
	}
	if p := c.GIDIndex; p != nil && *p != GIDIndexAuto && *p != GIDIndexNone {
		if len(*p) > MaxScalarLength {
			errs = append(errs, field.TooLong(fldPath.Child("gidIndex"), "", MaxScalarLength))
		} else if _, ok := p.Index(); !ok {
			errs = append(errs, field.Invalid(fldPath.Child("gidIndex"), string(*p),
				"must be auto, none or a number from 0 to 255"))
		}
	}
	if c.Memlock != nil {
		errs = append(errs, validateMemlock(fldPath.Child("memlock"), *c.Memlock)...)
	}
	errs = append(errs, c.validateLimits(fldPath)...)
	if c.Network != nil {
		errs = append(errs, c.Network.validate(fldPath.Child("network"))...)
	}
	if c.Fabric != nil {
		errs = append(errs, c.Fabric.validate(fldPath.Child("fabric"))...)
	}
	return errs
}

func isCharDeviceSet(s CharDeviceSet) bool {
	for _, v := range charDeviceSets {
		if s == v {
			return true
		}
	}
	return false
}

// Merge combines the configs that apply to one request, field by field: a field set in
// a later config overrides the same field of an earlier one, so callers pass the class's
// configs first and the claim's after them. Nil configs are skipped. The result is a new,
// defaulted config that shares no memory with its inputs.
func Merge(configs ...*RdmaConfig) *RdmaConfig {
	out := &RdmaConfig{}
	for _, c := range configs {
		if c != nil {
			overlay(c, out)
		}
	}
	out.Default()
	return out
}

// overlay sets every field that is set in c on out, to a copy of c's value: out then
// shares no memory with c, and fields unset in c keep out's values. Merge is made of
// it; TestMerge and TestDeepCopyCoversEveryField check it against every field.
func overlay(c, out *RdmaConfig) {
	copyPtr(&out.CharDevices, c.CharDevices)
	copyPtr(&out.NCCLEnv, c.NCCLEnv)
	copyPtr(&out.GIDIndex, c.GIDIndex)
	copyPtr(&out.Memlock, c.Memlock)
	copyPtr(&out.AllowedCharDevices, c.AllowedCharDevices)
	copyPtr(&out.MaxMemlock, c.MaxMemlock)
	if c.AllowedNetwork != nil {
		out.AllowedNetwork = c.AllowedNetwork.DeepCopy()
	}
	if c.Network != nil {
		n := &NetworkConfig{}
		if out.Network != nil && out.Network != c.Network {
			overlayNetwork(out.Network, n)
		}
		overlayNetwork(c.Network, n)
		out.Network = n
	}
	if c.AllowedFabric != nil {
		out.AllowedFabric = c.AllowedFabric.DeepCopy()
	}
	if c.Fabric != nil {
		f := &FabricConfig{}
		if out.Fabric != nil && out.Fabric != c.Fabric {
			overlayFabric(out.Fabric, f)
		}
		overlayFabric(c.Fabric, f)
		out.Fabric = f
	}
}

// copyPtr points *dst at a copy of *src when src is set.
func copyPtr[T any](dst **T, src *T) {
	if src != nil {
		v := *src
		*dst = &v
	}
}

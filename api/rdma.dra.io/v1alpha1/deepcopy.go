package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// The deep copies are written by hand: the types are a handful of pointers to scalars,
// and TestDeepCopyCoversEveryField fails when a field is added without being copied.

// DeepCopyInto copies c into out; out shares no memory with c afterwards.
func (c *RdmaConfig) DeepCopyInto(out *RdmaConfig) {
	*out = *c
	overlay(c, out)
}

// overlay sets every field that is set in c on out, to a copy of c's value: out then
// shares no memory with c, and fields unset in c keep out's values. DeepCopyInto and
// Merge are both made of it.
func overlay(c, out *RdmaConfig) {
	copyPtr(&out.CharDevices, c.CharDevices)
	copyPtr(&out.NCCLEnv, c.NCCLEnv)
	copyPtr(&out.GIDIndex, c.GIDIndex)
	copyPtr(&out.Memlock, c.Memlock)
	copyPtr(&out.AllowedCharDevices, c.AllowedCharDevices)
	copyPtr(&out.MaxMemlock, c.MaxMemlock)
	if c.Network != nil {
		n := &NetworkConfig{}
		if out.Network != nil && out.Network != c.Network {
			overlayNetwork(out.Network, n)
		}
		overlayNetwork(c.Network, n)
		out.Network = n
	}
}

// copyPtr points *dst at a copy of *src when src is set.
func copyPtr[T any](dst **T, src *T) {
	if src != nil {
		v := *src
		*dst = &v
	}
}

// DeepCopy returns a copy of c that shares no memory with it; nil stays nil.
func (c *RdmaConfig) DeepCopy() *RdmaConfig {
	if c == nil {
		return nil
	}
	out := new(RdmaConfig)
	c.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object, so that RdmaConfig can be registered in a
// scheme.
func (c *RdmaConfig) DeepCopyObject() runtime.Object {
	if c := c.DeepCopy(); c != nil {
		return c
	}
	return nil
}

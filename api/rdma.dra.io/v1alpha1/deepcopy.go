package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime"
)

// The deep copies are written by hand: the types are a handful of pointers to scalars,
// and TestDeepCopyCoversEveryField fails when a field is added without being copied.

// DeepCopyInto copies c into out; out shares no memory with c afterwards.
func (c *RdmaConfig) DeepCopyInto(out *RdmaConfig) {
	*out = *c
	if c.CharDevices != nil {
		v := *c.CharDevices
		out.CharDevices = &v
	}
	if c.NCCLEnv != nil {
		v := *c.NCCLEnv
		out.NCCLEnv = &v
	}
	if c.GIDIndex != nil {
		v := *c.GIDIndex
		out.GIDIndex = &v
	}
	if c.Memlock != nil {
		v := *c.Memlock
		out.Memlock = &v
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

package v1alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Deep copies of the RdmaPool types, by hand like RdmaConfig's; TestPoolDeepCopy fills
// every field by reflection and fails when one is shared or lost.

// DeepCopyInto copies p into out; out shares no memory with p afterwards.
func (p *RdmaPool) DeepCopyInto(out *RdmaPool) {
	*out = *p
	p.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	p.Spec.DeepCopyInto(&out.Spec)
	p.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a copy of p; nil stays nil.
func (p *RdmaPool) DeepCopy() *RdmaPool {
	if p == nil {
		return nil
	}
	out := new(RdmaPool)
	p.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (p *RdmaPool) DeepCopyObject() runtime.Object {
	if c := p.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies s into out.
func (s *RdmaPoolSpec) DeepCopyInto(out *RdmaPoolSpec) {
	*out = *s
	s.Selectors.DeepCopyInto(&out.Selectors)
	if s.ExtendedResourceName != nil {
		v := *s.ExtendedResourceName
		out.ExtendedResourceName = &v
	}
	if s.Config != nil {
		out.Config = s.Config.DeepCopy()
	}
}

// DeepCopyInto copies s into out.
func (s *PoolSelectors) DeepCopyInto(out *PoolSelectors) {
	*out = *s
	out.Vendors = slices.Clone(s.Vendors)
	out.DeviceIDs = slices.Clone(s.DeviceIDs)
	out.Drivers = slices.Clone(s.Drivers)
	out.IfNames = slices.Clone(s.IfNames)
	out.IBDevs = slices.Clone(s.IBDevs)
	out.LinkTypes = slices.Clone(s.LinkTypes)
	out.PCIAddresses = slices.Clone(s.PCIAddresses)
	if s.MinSpeedGbps != nil {
		v := *s.MinSpeedGbps
		out.MinSpeedGbps = &v
	}
}

// DeepCopyInto copies s into out.
func (s *RdmaPoolStatus) DeepCopyInto(out *RdmaPoolStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopyInto copies l into out.
func (l *RdmaPoolList) DeepCopyInto(out *RdmaPoolList) {
	*out = *l
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]RdmaPool, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a copy of l; nil stays nil.
func (l *RdmaPoolList) DeepCopy() *RdmaPoolList {
	if l == nil {
		return nil
	}
	out := new(RdmaPoolList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *RdmaPoolList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}

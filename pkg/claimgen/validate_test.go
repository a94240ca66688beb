package claimgen

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// TestValidateObject breaks a valid claim in each way the API server or the allocator
// refuses, and checks the field paths of the errors.
func TestValidateObject(t *testing.T) {
	base := func(edit func(d *resourceapi.DeviceClaim)) *resourceapi.ResourceClaim {
		obj, err := Build(opts(2, func(o *Options) { o.Kind, o.DistinctRails = KindClaim, true }))
		if err != nil {
			t.Fatal(err)
		}
		c := obj.(*resourceapi.ResourceClaim)
		if edit != nil {
			edit(&c.Spec.Devices)
		}
		return c
	}
	manyRequests := func(d *resourceapi.DeviceClaim, n int) {
		for i := len(d.Requests); i < n; i++ {
			d.Requests = append(d.Requests, request(GPURequest(i), DefaultGPUClass, nil))
		}
	}
	tests := []struct {
		name string
		obj  runtime.Object
		want []string // "<type> <field>"
	}{
		{name: "valid", obj: base(nil)},
		{name: "valid template", obj: func() runtime.Object { o, _ := Build(opts(8, nil)); return o }()},
		{name: "33 requests", obj: base(func(d *resourceapi.DeviceClaim) { manyRequests(d, 33) }),
			want: []string{"FieldValueTooMany spec.devices.requests", "FieldValueInvalid spec.devices.requests"}},
		{name: "33 devices in 2 requests", obj: base(func(d *resourceapi.DeviceClaim) { d.Requests[0].Exactly.Count = 30 }),
			want: []string{"FieldValueInvalid spec.devices.requests"}},
		{name: "a count below zero", obj: base(func(d *resourceapi.DeviceClaim) { d.Requests[1].Exactly.Count = -1 }),
			want: []string{"FieldValueInvalid spec.devices.requests[1].exactly.count"}},
		{name: "All with a count", obj: base(func(d *resourceapi.DeviceClaim) {
			d.Requests[1].Exactly.AllocationMode, d.Requests[1].Exactly.Count = resourceapi.DeviceAllocationModeAll, 2
		}), want: []string{"FieldValueInvalid spec.devices.requests[1].exactly.count"}},
		{name: "duplicate and bad names", obj: base(func(d *resourceapi.DeviceClaim) { d.Requests[1].Name, d.Requests[2].Name = "gpu-0", "NIC_0" }),
			want: []string{"FieldValueDuplicate spec.devices.requests[1].name", "FieldValueInvalid spec.devices.requests[2].name",
				"FieldValueInvalid spec.devices.constraints[0].requests[1]", "FieldValueInvalid spec.devices.constraints[1].requests[0]",
				"FieldValueInvalid spec.devices.constraints[2].requests[0]"}},
		{name: "neither exactly nor firstAvailable", obj: base(func(d *resourceapi.DeviceClaim) { d.Requests[0].Exactly = nil }),
			want: []string{"FieldValueRequired spec.devices.requests[0]"}},
		{name: "class", obj: base(func(d *resourceapi.DeviceClaim) { d.Requests[3].Exactly.DeviceClassName = "" }),
			want: []string{"FieldValueRequired spec.devices.requests[3].exactly.deviceClassName"}},
		{name: "CEL that does not compile", obj: base(func(d *resourceapi.DeviceClaim) {
			d.Requests[2].Exactly.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: "device.attributes["}}}
		}), want: []string{"FieldValueInvalid spec.devices.requests[2].exactly.selectors[0].cel.expression"}},
		{name: "firstAvailable", obj: base(func(d *resourceapi.DeviceClaim) {
			d.Requests[0] = resourceapi.DeviceRequest{Name: "gpu-0", FirstAvailable: []resourceapi.DeviceSubRequest{
				{Name: "big", DeviceClassName: DefaultGPUClass, Count: 31}, {Name: "Small", DeviceClassName: DefaultGPUClass}}}
		}), want: []string{"FieldValueInvalid spec.devices.requests[0].firstAvailable[1].name", "FieldValueInvalid spec.devices.requests"}},
		{name: "constraint without attribute", obj: base(func(d *resourceapi.DeviceClaim) { d.Constraints[0].MatchAttribute = nil }),
			want: []string{"FieldValueRequired spec.devices.constraints[0]"}},
		{name: "constraint with both", obj: base(func(d *resourceapi.DeviceClaim) { d.Constraints[2].MatchAttribute = ptr.To(railAttribute) }),
			want: []string{"FieldValueInvalid spec.devices.constraints[2]"}},
		{name: "unqualified and malformed attributes", obj: base(func(d *resourceapi.DeviceClaim) {
			d.Constraints[0].MatchAttribute = ptr.To(resourceapi.FullyQualifiedName("pcieRoot"))
			d.Constraints[1].MatchAttribute = ptr.To(resourceapi.FullyQualifiedName("example.com/pcie-root"))
		}), want: []string{"FieldValueInvalid spec.devices.constraints[0].matchAttribute", "FieldValueInvalid spec.devices.constraints[1].matchAttribute"}},
		{name: "a request twice in a constraint", obj: base(func(d *resourceapi.DeviceClaim) { d.Constraints[0].Requests[1] = "gpu-0" }),
			want: []string{"FieldValueDuplicate spec.devices.constraints[0].requests[1]"}},
		{name: "33 constraints", obj: base(func(d *resourceapi.DeviceClaim) {
			for len(d.Constraints) < 33 {
				d.Constraints = append(d.Constraints, d.Constraints[0])
			}
		}), want: []string{"FieldValueTooMany spec.devices.constraints"}},
		{name: "metadata", obj: func() runtime.Object {
			c := base(nil)
			c.Name, c.Namespace = "Trainer", "ml.team"
			return c
		}(), want: []string{"FieldValueInvalid metadata.name", "FieldValueInvalid metadata.namespace"}},
		{name: "another kind", obj: &resourceapi.DeviceClass{}, want: []string{"InternalError <nil>"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, e := range ValidateObject(tt.obj) {
				f := e.Field
				if f == "" {
					f = "<nil>"
				}
				got = append(got, string(e.Type)+" "+f)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s\n%v", diff, ValidateObject(tt.obj))
			}
		})
	}
}

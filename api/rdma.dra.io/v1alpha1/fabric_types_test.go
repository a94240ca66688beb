package v1alpha1

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// TestFabricValidate checks every fabric field at its bounds and beyond, with the message
// a user reads, field path first.
func TestFabricValidate(t *testing.T) {
	tests := []struct {
		name, fabric string
		want         string // substring of the errors; "" means valid
	}{
		{name: "empty", fabric: `{}`},
		{name: "every field at its low bound", fabric: `{"trafficClass":0,"serviceLevel":0,"adaptiveRouting":false,"qpsPerConnection":1,"pkey":"0x0001","roceVersion":1,"addressFamily":"ipv4","topologyFile":false}`},
		{name: "every field at its high bound", fabric: `{"trafficClass":255,"serviceLevel":15,"adaptiveRouting":true,"qpsPerConnection":16,"pkey":"0xffff","roceVersion":2,"addressFamily":"ipv6","topologyFile":true}`},
		{name: "traffic class too high", fabric: `{"trafficClass":256}`, want: `p.fabric.trafficClass: Invalid value: 256: must be from 0 to 255`},
		{name: "traffic class negative", fabric: `{"trafficClass":-1}`, want: `p.fabric.trafficClass: Invalid value: -1: must be from 0 to 255`},
		{name: "service level too high", fabric: `{"serviceLevel":16}`, want: `p.fabric.serviceLevel: Invalid value: 16: must be from 0 to 15`},
		{name: "no queue pairs", fabric: `{"qpsPerConnection":0}`, want: `p.fabric.qpsPerConnection: Invalid value: 0: must be from 1 to 16`},
		{name: "too many queue pairs", fabric: `{"qpsPerConnection":17}`, want: `p.fabric.qpsPerConnection: Invalid value: 17: must be from 1 to 16`},
		{name: "pkey 0", fabric: `{"pkey":"0x0000"}`, want: `p.fabric.pkey: Invalid value: "0x0000": must be a partition key from 0x0001 to 0xffff other than 0x8000`},
		{name: "pkey of the bare membership bit", fabric: `{"pkey":"0x8000"}`, want: `p.fabric.pkey: Invalid value: "0x8000"`},
		{name: "pkey without 0x", fabric: `{"pkey":"8001"}`, want: `p.fabric.pkey: Invalid value: "8001": must be 0x followed by one to four hex digits`},
		{name: "RoCE version 3", fabric: `{"roceVersion":3}`, want: `p.fabric.roceVersion: Invalid value: 3: must be 1 or 2`},
		{name: "address family spelt like NCCL", fabric: `{"addressFamily":"AF_INET6"}`, want: `p.fabric.addressFamily: Unsupported value: "AF_INET6": supported values: "ipv4", "ipv6"`},
		{name: "address family longer than a scalar may be", fabric: `{"addressFamily":"` + strings.Repeat("x", 65) + `"}`, want: `p.fabric.addressFamily: Too long`},
		{name: "several at once", fabric: `{"trafficClass":300,"serviceLevel":20}`, want: `p.fabric.serviceLevel: Invalid value: 20`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgOf(t, `,"fabric":`+tt.fabric)
			errs := c.ValidateFor(field.NewPath("p"), SourceClaim)
			if tt.want == "" {
				if len(errs) > 0 {
					t.Fatalf("Validate: %v", errs)
				}
				return
			}
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Errorf("Validate: %v\nwant %q", errs, tt.want)
			}
		})
	}
}

// TestFabricMergesFieldByField: a claim's fabric field overrides the class's same field
// and leaves the others; the result shares no memory with either.
func TestFabricMergesFieldByField(t *testing.T) {
	class := cfgOf(t, `,"fabric":{"trafficClass":106,"serviceLevel":3,"pkey":"0x8001"}`)
	claim := cfgOf(t, `,"fabric":{"serviceLevel":5,"topologyFile":true}`)
	got := Merge(class, claim)
	want := &FabricConfig{TrafficClass: ptr.To[int32](106), ServiceLevel: ptr.To[int32](5), PKey: ptr.To("0x8001"), TopologyFile: ptr.To(true)}
	if diff := cmp.Diff(want, got.Fabric); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	*got.Fabric.TrafficClass, *got.Fabric.ServiceLevel = 1, 1
	if *class.Fabric.TrafficClass != 106 || *claim.Fabric.ServiceLevel != 5 {
		t.Errorf("Merge result aliases its inputs")
	}
	if m := Merge(cfgOf(t, "")); m.Fabric != nil {
		t.Errorf("Merge of configs without fabric = %+v, want nil (NCCL's and UCX's defaults)", m.Fabric)
	}
}

// TestFabricGIDWant: the GID entry a config asks for, NCCL's defaults filling the rest.
func TestFabricGIDWant(t *testing.T) {
	for _, tt := range []struct {
		name, fabric string
		follows      bool
		version      int
		family       AddressFamily
	}{
		{"nothing set", `{}`, false, 2, AddressFamilyIPv4},
		{"other fields only", `{"trafficClass":106}`, false, 2, AddressFamilyIPv4},
		{"IPv6", `{"addressFamily":"ipv6"}`, true, 2, AddressFamilyIPv6},
		{"RoCE v1", `{"roceVersion":1}`, true, 1, AddressFamilyIPv4},
		{"both", `{"roceVersion":1,"addressFamily":"ipv6"}`, true, 1, AddressFamilyIPv6},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := cfgOf(t, `,"fabric":`+tt.fabric).Fabric
			version, family := f.GIDWant()
			if f.FollowsGID() != tt.follows || version != tt.version || family != tt.family {
				t.Errorf("FollowsGID %v, GIDWant %d %s; want %v, %d %s", f.FollowsGID(), version, family, tt.follows, tt.version, tt.family)
			}
		})
	}
	if v, fam := (*FabricConfig)(nil).GIDWant(); v != 2 || fam != AddressFamilyIPv4 || (*FabricConfig)(nil).FollowsGID() {
		t.Errorf("nil config: %d %s", v, fam)
	}
}

package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestFabricPolicy is the table of docs/claim-config.md's allowedFabric: what a claim's
// fabric section may set under its class's config, enforced the same way at prepare
// (Resolve) and in the webhook (ExceedsLimits).
func TestFabricPolicy(t *testing.T) {
	const open = `,"allowedFabric":{"trafficClasses":[106,104],"serviceLevels":[0,3],"pkeys":["0x8001","0x0002"],` +
		`"addressFamilies":["ipv6"],"roceVersions":[2],"adaptiveRouting":true,"maxQPsPerConnection":4}`
	tests := []struct {
		name, class, claim string
		wantErr            []string // substrings, each in the error; none: allowed
	}{
		{name: "no fabric asked on a class without a policy"},
		{name: "topologyFile needs no grant", claim: `,"fabric":{"topologyFile":true}`},
		{name: "traffic class without a grant", claim: `,"fabric":{"trafficClass":106}`,
			wantErr: []string{`fabric.trafficClass: Forbidden: is not allowed: the DeviceClass's allowedFabric.trafficClasses is empty`}},
		{name: "traffic class granted", class: open, claim: `,"fabric":{"trafficClass":104}`},
		{name: "traffic class not listed", class: open, claim: `,"fabric":{"trafficClass":96}`,
			wantErr: []string{`fabric.trafficClass: Forbidden: 96 is not one of the DeviceClass's allowedFabric.trafficClasses [106, 104]`}},
		{name: "service level without a grant", claim: `,"fabric":{"serviceLevel":3}`,
			wantErr: []string{`fabric.serviceLevel: Forbidden: is not allowed: the DeviceClass's allowedFabric.serviceLevels is empty`}},
		{name: "service level granted", class: open, claim: `,"fabric":{"serviceLevel":3}`},
		{name: "service level not listed", class: open, claim: `,"fabric":{"serviceLevel":7}`,
			wantErr: []string{`fabric.serviceLevel: Forbidden: 7 is not one of the DeviceClass's allowedFabric.serviceLevels [0, 3]`}},
		{name: "pkey without a grant", claim: `,"fabric":{"pkey":"0x8001"}`,
			wantErr: []string{`fabric.pkey: Forbidden: is not allowed: the DeviceClass's allowedFabric.pkeys is empty`}},
		{name: "pkey granted, written otherwise", class: open, claim: `,"fabric":{"pkey":"0x8001"}`},
		{name: "the limited form of a granted full key", class: open, claim: `,"fabric":{"pkey":"0x0001"}`},
		{name: "the full form of a granted limited key", class: open, claim: `,"fabric":{"pkey":"0x8002"}`,
			wantErr: []string{`fabric.pkey: Forbidden: "0x8002" is not one of the DeviceClass's allowedFabric.pkeys ["0x8001", "0x0002"]`}},
		{name: "address family granted", class: open, claim: `,"fabric":{"addressFamily":"ipv6"}`},
		{name: "address family not listed", class: open, claim: `,"fabric":{"addressFamily":"ipv4"}`,
			wantErr: []string{`fabric.addressFamily: Forbidden: "ipv4" is not one of the DeviceClass's allowedFabric.addressFamilies ["ipv6"]`}},
		{name: "RoCE version not listed", class: open, claim: `,"fabric":{"roceVersion":1}`,
			wantErr: []string{`fabric.roceVersion: Forbidden: 1 is not one of the DeviceClass's allowedFabric.roceVersions [2]`}},
		{name: "RoCE version without a grant", claim: `,"fabric":{"roceVersion":2}`,
			wantErr: []string{`fabric.roceVersion: Forbidden: is not allowed: the DeviceClass's allowedFabric.roceVersions is empty`}},
		{name: "adaptive routing without a grant", claim: `,"fabric":{"adaptiveRouting":false}`,
			wantErr: []string{`fabric.adaptiveRouting: Forbidden: is not allowed: the DeviceClass's allowedFabric.adaptiveRouting is not true`}},
		{name: "adaptive routing granted as false", class: `,"allowedFabric":{"adaptiveRouting":false}`, claim: `,"fabric":{"adaptiveRouting":true}`,
			wantErr: []string{`fabric.adaptiveRouting: Forbidden`}},
		{name: "adaptive routing toggled", class: open, claim: `,"fabric":{"adaptiveRouting":false}`},
		{name: "queue pairs without a grant", claim: `,"fabric":{"qpsPerConnection":2}`,
			wantErr: []string{`fabric.qpsPerConnection: Forbidden: is not allowed: the DeviceClass's allowedFabric.maxQPsPerConnection is unset`}},
		{name: "queue pairs up to the grant", class: open, claim: `,"fabric":{"qpsPerConnection":4}`},
		{name: "queue pairs over the grant", class: open, claim: `,"fabric":{"qpsPerConnection":5}`,
			wantErr: []string{`fabric.qpsPerConnection: Forbidden: 5 exceeds the DeviceClass's allowedFabric.maxQPsPerConnection 4`}},
		{name: "the class's own values are the admin's", class: `,"fabric":{"trafficClass":96,"serviceLevel":7,"pkey":"0x8003","roceVersion":1,"addressFamily":"ipv6","adaptiveRouting":true,"qpsPerConnection":16}`},
		{name: "a claim repeating the class's value needs a grant too", class: `,"fabric":{"trafficClass":96}`, claim: `,"fabric":{"trafficClass":96}`,
			wantErr: []string{`fabric.trafficClass: Forbidden`}},
		{name: "several fields at once", claim: `,"fabric":{"trafficClass":1,"pkey":"0x8001","qpsPerConnection":2,"topologyFile":true}`,
			wantErr: []string{`fabric.trafficClass: Forbidden`, `fabric.pkey: Forbidden`, `fabric.qpsPerConnection: Forbidden`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var class []*RdmaConfig
			if tt.class != "" {
				class = append(class, cfgOf(t, tt.class))
				if errs := class[0].ValidateFor(nil, SourceClass); len(errs) > 0 {
					t.Fatalf("class config invalid: %v", errs)
				}
			}
			claim := cfgOf(t, tt.claim)
			if errs := claim.ValidateFor(nil, SourceClaim); len(errs) > 0 {
				t.Fatalf("claim config invalid: %v", errs)
			}
			got, err := Resolve(false, class, []*RdmaConfig{claim})
			webhook := ExceedsLimits(nil, claim, class)
			if len(tt.wantErr) == 0 {
				if err != nil || len(webhook) > 0 {
					t.Fatalf("refused: prepare %v, webhook %v", err, webhook)
				}
				if errs := got.Validate(nil); len(errs) > 0 {
					t.Errorf("resolved config invalid: %v", errs)
				}
				return
			}
			if err == nil || len(webhook) != len(tt.wantErr) {
				t.Fatalf("prepare %v, webhook %v; want %q", err, webhook, tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("prepare error %q, want it to contain %q", err, want)
				}
				if !strings.Contains(webhook.ToAggregate().Error(), want) {
					t.Errorf("webhook error %q, want it to contain %q", webhook.ToAggregate(), want)
				}
			}
		})
	}
}

// TestFabricPolicyResolvesClaimsOverClass: what a request ends up with when the class
// sets fabric values and grants, and claims narrow them.
func TestFabricPolicyResolvesClaimsOverClass(t *testing.T) {
	class := cfgOf(t, `,"fabric":{"trafficClass":106,"serviceLevel":3},"allowedFabric":{"trafficClasses":[106,104]}`)
	first := cfgOf(t, `,"fabric":{"trafficClass":104}`)
	second := cfgOf(t, `,"fabric":{"topologyFile":true}`)
	got, err := Resolve(true, []*RdmaConfig{class}, []*RdmaConfig{first, second})
	if err != nil {
		t.Fatal(err)
	}
	f := got.Fabric
	if f == nil || *f.TrafficClass != 104 || *f.ServiceLevel != 3 || !*f.TopologyFile || f.PKey != nil {
		t.Errorf("resolved fabric %+v, want trafficClass 104 (claim), serviceLevel 3 (class), topologyFile (claim)", f)
	}
	// Every claim config's fabric counts, not only the last one's.
	third := cfgOf(t, `,"fabric":{"serviceLevel":3}`)
	if _, err := Resolve(true, []*RdmaConfig{class}, []*RdmaConfig{third, second}); err == nil || !strings.Contains(err.Error(), "fabric.serviceLevel: Forbidden") {
		t.Errorf("an earlier claim config's serviceLevel: %v, want it refused", err)
	}
}

// TestFabricPolicyClaimOnlyAdmin: allowedFabric is the admin's.
func TestFabricPolicyClaimOnlyAdmin(t *testing.T) {
	c := cfgOf(t, `,"allowedFabric":{"trafficClasses":[106]}`)
	if errs := c.ValidateFor(field.NewPath("p"), SourceClass); len(errs) > 0 {
		t.Errorf("class config: %v", errs)
	}
	errs := c.ValidateFor(field.NewPath("p"), SourceClaim)
	if len(errs) != 1 || errs[0].Field != "p.allowedFabric" || errs[0].Type != field.ErrorTypeForbidden ||
		!strings.Contains(errs[0].Error(), "is an admin limit: only a DeviceClass config may set it") {
		t.Errorf("claim config: %v, want one Forbidden at p.allowedFabric", errs)
	}
	if _, err := Resolve(false, nil, []*RdmaConfig{c}); err == nil || !strings.Contains(err.Error(), "allowedFabric") {
		t.Errorf("Resolve: %v, want the admin-field error naming allowedFabric", err)
	}
}

// TestFabricPolicyValidate: bad policies name the field and the value; lists are
// bounded before anything in them is parsed.
func TestFabricPolicyValidate(t *testing.T) {
	for _, tt := range []struct{ name, policy, want string }{
		{"traffic class", `{"trafficClasses":[106,300]}`, `allowedFabric.trafficClasses[1]: Invalid value: 300: must be from 0 to 255`},
		{"service level", `{"serviceLevels":[16]}`, `allowedFabric.serviceLevels[0]: Invalid value: 16: must be from 0 to 15`},
		{"pkey", `{"pkeys":["0x8000"]}`, `allowedFabric.pkeys[0]: Invalid value: "0x8000"`},
		{"address family", `{"addressFamilies":["inet"]}`, `allowedFabric.addressFamilies[0]: Unsupported value: "inet": supported values: "ipv4", "ipv6"`},
		{"RoCE version", `{"roceVersions":[0]}`, `allowedFabric.roceVersions[0]: Invalid value: 0: must be 1 or 2`},
		{"queue pairs", `{"maxQPsPerConnection":32}`, `allowedFabric.maxQPsPerConnection: Invalid value: 32: must be from 1 to 16`},
		{"too many", `{"pkeys":[` + strings.Repeat(`"0x8000",`, 32) + `"0x8000"]}`, `allowedFabric.pkeys: Too many: 33: must have at most 32 items`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			errs := cfgOf(t, `,"allowedFabric":`+tt.policy).Validate(nil)
			if len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tt.want) {
				t.Errorf("Validate: %v, want %q", errs, tt.want)
			}
			if tt.name == "too many" && len(errs) != 1 {
				t.Errorf("an oversized list was parsed too: %v", errs)
			}
		})
	}
}

package v1alpha1

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func cfgOf(t *testing.T, fields string) *RdmaConfig {
	t.Helper()
	c, err := DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"` + fields + `}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestResolveEnforcesClassLimits is the table of docs/claim-config.md ("Admin limits"):
// the defaults of shared and exclusive devices, defaults lowered to a limit, and claim
// values beyond a limit refused.
func TestResolveEnforcesClassLimits(t *testing.T) {
	tests := []struct {
		name         string
		shared       bool
		class, claim string
		wantChar     CharDeviceSet
		wantMemlock  MemlockPolicy
		wantErr      string
	}{
		{name: "shared default is verbs only", shared: true, wantChar: CharDevicesVerbs, wantMemlock: MemlockUnset},
		{name: "exclusive default keeps diagnostics", wantChar: CharDevicesDiagnostics, wantMemlock: MemlockUnset},
		{name: "shared claim may ask for diagnostics without a limit", shared: true, claim: `,"charDevices":"diagnostics"`, wantChar: CharDevicesDiagnostics, wantMemlock: MemlockUnset},
		{name: "exclusive default lowered to the limit", class: `,"allowedCharDevices":"verbs"`, wantChar: CharDevicesVerbs, wantMemlock: MemlockUnset},
		{name: "claim management over a verbs limit", shared: true, class: `,"allowedCharDevices":"verbs"`, claim: `,"charDevices":"management"`,
			wantErr: `charDevices: Forbidden: "management" exceeds the DeviceClass's allowedCharDevices "verbs"`},
		{name: "claim over the class's own charDevices is fine within the limit", class: `,"charDevices":"verbs","allowedCharDevices":"diagnostics"`, claim: `,"charDevices":"diagnostics"`,
			wantChar: CharDevicesDiagnostics, wantMemlock: MemlockUnset},
		{name: "memlock within the cap", class: `,"maxMemlock":"64Gi"`, claim: `,"memlock":"64Gi"`, wantChar: CharDevicesDiagnostics, wantMemlock: "64Gi"},
		{name: "memlock over the cap", class: `,"maxMemlock":"64Gi"`, claim: `,"memlock":"68719476737"`,
			wantErr: `memlock: Forbidden: "68719476737" exceeds the DeviceClass's maxMemlock "64Gi"`},
		{name: "unlimited memlock under a cap", class: `,"maxMemlock":"64Gi"`, claim: `,"memlock":"unlimited"`, wantErr: `memlock: Forbidden`},
		{name: "maxMemlock unset forbids raising", class: `,"maxMemlock":"unset"`, claim: `,"memlock":"1Gi"`, wantErr: `memlock: Forbidden`},
		{name: "maxMemlock unlimited allows all", class: `,"maxMemlock":"unlimited"`, claim: `,"memlock":"unlimited"`, wantChar: CharDevicesDiagnostics, wantMemlock: MemlockUnlimited},
		{name: "a claim may not set a limit", claim: `,"allowedCharDevices":"management"`, wantErr: "only a DeviceClass config may set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var class, claim []*RdmaConfig
			if tt.class != "" {
				class = append(class, cfgOf(t, tt.class))
			}
			if tt.claim != "" {
				claim = append(claim, cfgOf(t, tt.claim))
			}
			got, err := Resolve(tt.shared, class, claim)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *got.CharDevices != tt.wantChar || *got.Memlock != tt.wantMemlock {
				t.Errorf("charDevices %q memlock %q, want %q %q", *got.CharDevices, *got.Memlock, tt.wantChar, tt.wantMemlock)
			}
			if len(got.Validate(nil)) > 0 {
				t.Errorf("resolved config invalid: %v", got.Validate(nil))
			}
		})
	}
}

// TestValidateForClaimForbidsLimits: only a class config may set the admin limits.
func TestValidateForClaimForbidsLimits(t *testing.T) {
	c := cfgOf(t, `,"allowedCharDevices":"verbs","maxMemlock":"1Gi"`)
	if errs := c.ValidateFor(field.NewPath("p"), SourceClass); len(errs) > 0 {
		t.Errorf("class config: %v", errs)
	}
	errs := c.ValidateFor(field.NewPath("p"), SourceClaim)
	if len(errs) != 2 || errs[0].Field != "p.allowedCharDevices" || errs[1].Field != "p.maxMemlock" || errs[0].Type != field.ErrorTypeForbidden {
		t.Errorf("claim config: %v", errs)
	}
	bad := cfgOf(t, `,"allowedCharDevices":"all","maxMemlock":"lots"`)
	if errs := bad.Validate(nil); len(errs) != 2 {
		t.Errorf("invalid limits: %v", errs)
	}
}

// TestScalarsBoundedBeforeParsing: a memlock of a million digits is refused by its
// length (and quickly), not handed to the quantity parser, whose cost grows faster than
// its input; a document over the API's limit is refused whole.
func TestScalarsBoundedBeforeParsing(t *testing.T) {
	long := strings.Repeat("9", 1_000_000)
	start := time.Now()
	p := MemlockPolicy(long + "Ki")
	if _, ok := p.Bytes(); ok {
		t.Error("a million digits parsed")
	}
	c := &RdmaConfig{Memlock: &p, MaxMemlock: &p}
	errs := c.Validate(field.NewPath("x"))
	if len(errs) != 2 || errs[0].Type != field.ErrorTypeTooLong || errs[1].Type != field.ErrorTypeTooLong {
		t.Errorf("errors %v, want two TooLong", errs)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
	if _, err := DecodeBoundedConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"` + long + `"}`)); err == nil ||
		!strings.Contains(err.Error(), "at most 10240 are allowed") {
		t.Errorf("long document: %v", err)
	}
}

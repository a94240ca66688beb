package v1alpha1

import (
	"strings"
	"testing"

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
// length, not handed to the parsers, whose cost grows faster than their input; a
// document over the API's limit is refused whole. The long values are zeros ahead of a
// valid limit, which both parsers accept at any length: only the bound refuses them.
func TestScalarsBoundedBeforeParsing(t *testing.T) {
	zeros := strings.Repeat("0", 1_000_000)
	for _, tt := range []struct {
		name, valid string
		bytes       int64
	}{
		{"integer", "1", 1},
		{"quantity", "1Ki", 1024},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Just within the bound, the zeros are harmless: the value is valid.
			short := MemlockPolicy(strings.Repeat("0", MaxScalarLength-len(tt.valid)) + tt.valid)
			if n, ok := short.Bytes(); !ok || n != tt.bytes {
				t.Fatalf("%d characters: Bytes() = %d, %v; want %d", len(short), n, ok, tt.bytes)
			}
			for _, p := range []MemlockPolicy{"0" + short, MemlockPolicy(zeros + tt.valid)} {
				if n, ok := p.Bytes(); ok {
					t.Errorf("%d characters parsed to %d", len(p), n)
				}
				c := &RdmaConfig{Memlock: &p, MaxMemlock: &p}
				errs := c.Validate(field.NewPath("x"))
				if len(errs) != 2 || errs[0].Type != field.ErrorTypeTooLong || errs[1].Type != field.ErrorTypeTooLong {
					t.Errorf("%d characters: errors %v, want two TooLong", len(p), errs)
				}
			}
		})
	}
	long := strings.Repeat("9", 1_000_000)
	if _, err := DecodeBoundedConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"` + long + `"}`)); err == nil ||
		!strings.Contains(err.Error(), "at most 10240 are allowed") {
		t.Errorf("long document: %v", err)
	}
}

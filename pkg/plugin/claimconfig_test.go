package plugin

import (
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// TestPrepareEnforcesClassLimits: a claim cannot grant itself more than its DeviceClass
// allows: not the limits themselves, not management devices beyond allowedCharDevices,
// not memlock beyond maxMemlock. A shared port gets verbs only unless a config asks.
func TestPrepareEnforcesClassLimits(t *testing.T) {
	class, claim := resourceapi.AllocationConfigSourceClass, resourceapi.AllocationConfigSourceClaim
	cfg := func(s string) string { return `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"` + s + `}` }
	limits := opaque(class, cfg(`,"allowedCharDevices":"verbs","maxMemlock":"64Gi"`))
	tests := []struct {
		name     string
		configs  []resourceapi.DeviceAllocationConfiguration
		wantErr  string
		wantChar v1alpha1.CharDeviceSet // of the shared device (request a) and the exclusive one (b)
		wantExcl v1alpha1.CharDeviceSet
	}{
		{name: "defaults: verbs on a shared port, diagnostics on an exclusive one",
			wantChar: v1alpha1.CharDevicesVerbs, wantExcl: v1alpha1.CharDevicesDiagnostics},
		{name: "defaults lowered to the class's limit", configs: []resourceapi.DeviceAllocationConfiguration{limits},
			wantChar: v1alpha1.CharDevicesVerbs, wantExcl: v1alpha1.CharDevicesVerbs},
		{name: "claim asks for management beyond the limit",
			configs: []resourceapi.DeviceAllocationConfiguration{limits, opaque(claim, cfg(`,"charDevices":"management"`), "a")},
			wantErr: `request "a", device "mlx5-0-p1-shared": charDevices: Forbidden: "management" exceeds the DeviceClass's allowedCharDevices "verbs"`},
		{name: "claim asks for unlimited memlock under a cap",
			configs: []resourceapi.DeviceAllocationConfiguration{limits, opaque(claim, cfg(`,"memlock":"unlimited"`))},
			wantErr: `memlock: Forbidden: "unlimited" exceeds the DeviceClass's maxMemlock "64Gi"`},
		{name: "claim sets a limit",
			configs: []resourceapi.DeviceAllocationConfiguration{opaque(claim, cfg(`,"allowedCharDevices":"management","charDevices":"management"`))},
			wantErr: `invalid claim config: status.allocation.devices.config[0].opaque.parameters.allowedCharDevices: Forbidden: is an admin limit`},
		{name: "within the limits",
			configs:  []resourceapi.DeviceAllocationConfiguration{limits, opaque(claim, cfg(`,"memlock":"32Gi"`))},
			wantChar: v1alpha1.CharDevicesVerbs, wantExcl: v1alpha1.CharDevicesVerbs},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.driver()
			c := h.claim("c", []alloc{
				{request: "a", device: "mlx5-0-p1-shared", shareID: "6f1c1c4e-9a53-4b6f-8f3e-2f1f0b7c8a11"},
				{request: "b", device: "mlx5-1-p1"},
			}, tc.configs...)
			_, devices, err := d.planDevices(c)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if res := prepareOne(t, d, c); res.Err == nil {
					t.Error("prepare accepted the claim")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *devices[0].Config.CharDevices != tc.wantChar || *devices[1].Config.CharDevices != tc.wantExcl {
				t.Errorf("charDevices %q and %q, want %q and %q", *devices[0].Config.CharDevices, *devices[1].Config.CharDevices, tc.wantChar, tc.wantExcl)
			}
		})
	}
}

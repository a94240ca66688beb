package nodeconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestParseLegacyResources(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []LegacyResource
		wantErr []string
	}{
		{
			name: "defaults and normalized selectors",
			data: `
legacyResources:
- name: hca-shared-devices-a
  selectors: {vendors: ["0x15B3"], linkTypes: [IB]}
- name: hca-shared-devices-b
  maxPods: 63
`,
			want: []LegacyResource{
				{Name: "hca-shared-devices-a", MaxPods: DefaultLegacyPods, Selectors: Selector{Vendors: []string{"15b3"}, LinkTypes: []string{"InfiniBand"}}},
				{Name: "hca-shared-devices-b", MaxPods: 63},
			},
		},
		{
			name:    "name missing",
			data:    "legacyResources: [{maxPods: 4}]",
			wantErr: []string{"legacyResources[0].name: Required value"},
		},
		{
			name:    "name not a DNS label",
			data:    "legacyResources: [{name: hca_shared_devices_a}]",
			wantErr: []string{`legacyResources[0].name: Invalid value: "hca_shared_devices_a"`},
		},
		{
			name:    "name too long for its device",
			data:    "legacyResources: [{name: " + strings.Repeat("a", MaxLegacyResourceNameLength+1) + "}]",
			wantErr: []string{"legacyResources[0].name: Too long", "56"},
		},
		{
			name:    "duplicate name",
			data:    "legacyResources: [{name: a}, {name: b}, {name: a}]",
			wantErr: []string{`legacyResources[2].name: Duplicate value: "a (also legacyResources[0])"`},
		},
		{
			name:    "maxPods negative",
			data:    "legacyResources: [{name: a, maxPods: -1}]",
			wantErr: []string{"legacyResources[0].maxPods: Invalid value: -1: must be between 1 and 65536"},
		},
		{
			name:    "maxPods too large",
			data:    "legacyResources: [{name: a, maxPods: 65537}]",
			wantErr: []string{"legacyResources[0].maxPods: Invalid value: 65537"},
		},
		{
			name:    "bad selector",
			data:    "legacyResources: [{name: a, selectors: {vendors: [zz], linkTypes: [Infiniband]}}]",
			wantErr: []string{`legacyResources[0].selectors.vendors[0]: Invalid value: "zz"`, `legacyResources[0].selectors.linkTypes[0]: Unsupported value: "Infiniband"`},
		},
		{
			name:    "unknown field",
			data:    "legacyResources: [{name: a, rdmaHcaMax: 3}]",
			wantErr: []string{`unknown field "legacyResources[0].rdmaHcaMax"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := parseCase(t, tt.data, tt.wantErr)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, c.LegacyResources); diff != "" {
				t.Errorf("legacyResources (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLegacyResourceMatches(t *testing.T) {
	r := LegacyResource{Name: "a", Selectors: Selector{IfNames: []string{"ibp*"}}}
	for _, tt := range []struct {
		netdev string
		want   bool
	}{{"ibp3s0", true}, {"eth0", false}} {
		p := discovery.Port{IBDev: "mlx5_0", Port: 1, Netdev: tt.netdev}
		if got := r.Matches(&p); got != tt.want {
			t.Errorf("Matches(netdev %s) = %v, want %v", tt.netdev, got, tt.want)
		}
	}
	if got := r.DeviceName(); got != "legacy-a" {
		t.Errorf("DeviceName() = %q, want legacy-a", got)
	}
}

// parseCase parses data for a table case. With wantErr it checks that Parse fails with an
// error holding every entry and returns false; otherwise it fails the test on an error and
// returns the configuration.
func parseCase(t *testing.T, data string, wantErr []string) (Config, bool) {
	t.Helper()
	c, err := Parse([]byte(data))
	if len(wantErr) > 0 {
		if err == nil {
			t.Fatalf("Parse succeeded, want an error with %q", wantErr)
		}
		for _, w := range wantErr {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("error %q does not contain %q", err, w)
			}
		}
		return Config{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return c, true
}

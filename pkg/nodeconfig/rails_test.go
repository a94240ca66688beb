package nodeconfig

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestParseRails(t *testing.T) {
	tests := []struct {
		name    string
		data    string
		want    []Rail
		wantErr []string
	}{
		{
			name: "node pool by PCI slot, netdev and port GUID, normalized",
			data: `
rails:
- rail: 0
  selectors: [{pciAddresses: ["0000:0c:00.0"]}, {ifNames: [ibp12s0]}]
- rail: 1
  selectors: [{portGUIDs: ["0x7C8C090300C3CFEE", "7C8C:0903:00C3:*"], linkTypes: [IB]}]
`,
			want: []Rail{
				{Rail: ptr.To(0), Selectors: []Selector{{PCIAddresses: []string{"0000:0c:00.0"}}, {IfNames: []string{"ibp12s0"}}}},
				{Rail: ptr.To(1), Selectors: []Selector{{PortGUIDs: []string{"7c8c:0903:00c3:cfee", "7c8c:0903:00c3:*"}, LinkTypes: []string{"InfiniBand"}}}},
			},
		},
		{name: "two patterns may meet: only the ports can tell", data: `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:0c:*"]}]}
- {rail: 1, selectors: [{pciAddresses: ["0000:*:00.0"]}]}`,
			want: []Rail{
				{Rail: ptr.To(0), Selectors: []Selector{{PCIAddresses: []string{"0000:0c:*"}}}},
				{Rail: ptr.To(1), Selectors: []Selector{{PCIAddresses: []string{"0000:*:00.0"}}}},
			}},
		{name: "selectors on different facts may meet: only the ports can tell", data: `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:0c:00.0"]}]}
- {rail: 1, selectors: [{ifNames: [ibp12s0]}]}`,
			want: []Rail{
				{Rail: ptr.To(0), Selectors: []Selector{{PCIAddresses: []string{"0000:0c:00.0"}}}},
				{Rail: ptr.To(1), Selectors: []Selector{{IfNames: []string{"ibp12s0"}}}},
			}},
		{name: "rail at the bound", data: fmt.Sprintf("rails: [{rail: %d, selectors: [{ibdevs: [mlx5_0]}]}]", MaxRail),
			want: []Rail{{Rail: ptr.To(MaxRail), Selectors: []Selector{{IBDevs: []string{"mlx5_0"}}}}}},

		{name: "rail missing", data: "rails: [{selectors: [{ibdevs: [mlx5_0]}]}]",
			wantErr: []string{"rails[0].rail: Required value"}},
		{name: "rail negative", data: "rails: [{rail: -1, selectors: [{ibdevs: [mlx5_0]}]}]",
			wantErr: []string{"rails[0].rail: Invalid value: -1: must be between 0 and 63"}},
		{name: "rail above the bound", data: fmt.Sprintf("rails: [{rail: %d, selectors: [{ibdevs: [mlx5_0]}]}]", MaxRail+1),
			wantErr: []string{"rails[0].rail: Invalid value: 64"}},
		{name: "rail twice", data: "rails: [{rail: 2, selectors: [{ibdevs: [mlx5_0]}]}, {rail: 2, selectors: [{ibdevs: [mlx5_1]}]}]",
			wantErr: []string{`rails[1].rail: Duplicate value: "2 (also rails[0])`}},
		{name: "no selectors", data: "rails: [{rail: 0}]",
			wantErr: []string{"rails[0].selectors: Required value"}},
		{name: "empty selector list", data: "rails: [{rail: 0, selectors: []}]",
			wantErr: []string{"rails[0].selectors: Required value"}},
		{name: "empty selector", data: "rails: [{rail: 0, selectors: [{ibdevs: [mlx5_0]}, {}]}]",
			wantErr: []string{"rails[0].selectors[1]: Required value: an empty selector matches every port"}},
		{name: "too many selectors", data: "rails: [{rail: 0, selectors: [" + strings.Repeat("{ibdevs: [x]},", MaxRailSelectors+1) + "]}]",
			wantErr: []string{"rails[0].selectors: Too many: 65"}},
		{name: "bad selector named with its path", data: "rails: [{rail: 0, selectors: [{pciAddresses: ['0000:[']}]}]",
			wantErr: []string{"rails[0].selectors[0].pciAddresses[0]: Invalid value"}},
		{name: "port GUID cut short", data: "rails: [{rail: 0, selectors: [{portGUIDs: ['7c8c:0903:00c3']}]}]",
			wantErr: []string{`rails[0].selectors[0].portGUIDs[0]: Invalid value: "7c8c:0903:00c3": must be a port GUID`}},
		{name: "port GUID pattern in ibstat's notation", data: "rails: [{rail: 0, selectors: [{portGUIDs: ['0x7c8c*']}]}]",
			wantErr: []string{`rails[0].selectors[0].portGUIDs[0]: Invalid value: "0x7c8c*": a pattern must use the notation of sysfs`}},
		{name: "unknown field", data: "rails: [{id: 0, selectors: [{ibdevs: [mlx5_0]}]}]",
			wantErr: []string{`unknown field "rails[0].id"`}},

		{name: "one PCI address on two rails", data: `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:0c:00.0"]}]}
- {rail: 1, selectors: [{ifNames: [ibp12s0]}, {pciAddresses: ["0000:0c:00.0"]}]}`,
			wantErr: []string{"rails[1].selectors[1]: Forbidden: every port it matches is matched by rails[0].selectors[0] (rail 0) too"}},
		{name: "a pattern of one rail covers the address of another", data: `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:0c:00.0"], linkTypes: [IB]}]}
- {rail: 1, selectors: [{pciAddresses: ["0000:0c:*"]}]}`,
			wantErr: []string{"rails[1].selectors[0]: Forbidden: it matches every port that rails[0].selectors[0] (rail 0) matches"}},
		{name: "one GUID in two notations", data: `
rails:
- {rail: 0, selectors: [{portGUIDs: ["7c8c:0903:00c3:cfee"]}]}
- {rail: 1, selectors: [{portGUIDs: ["0x7c8c090300c3cfee"]}]}`,
			wantErr: []string{"rails[1].selectors[0]: Forbidden"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := parseCase(t, tt.data, tt.wantErr)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, c.Rails); diff != "" {
				t.Errorf("rails (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRailOf(t *testing.T) {
	port := func(ibdev, pci, netdev, guid string) *discovery.Port {
		return &discovery.Port{IBDev: ibdev, Port: 1, LinkLayer: discovery.LinkLayerInfiniBand,
			PCIBusID: pci, Netdev: netdev, PortGUID: guid}
	}
	const pool = `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:0c:00.0"]}, {portGUIDs: ["0xa088c20300aa0000"]}]}
- {rail: 1, selectors: [{pciAddresses: ["0000:2a:00.0"]}]}
- {rail: 7, selectors: [{ifNames: ["ibp42*"]}]}
`
	tests := []struct {
		name     string
		port     *discovery.Port
		wantRail int
		wantOK   bool
		wantErr  string
	}{
		{name: "by PCI address", port: port("mlx5_0", "0000:0c:00.0", "ibp12s0", "a088:c203:00aa:0001"), wantRail: 0, wantOK: true},
		{name: "by port GUID in ibstat's notation", port: port("mlx5_5", "0000:9a:00.0", "ibp154s0", "a088:c203:00aa:0000"), wantRail: 0, wantOK: true},
		{name: "matched by two rails: none, and the error names both", port: port("mlx5_1", "0000:2a:00.0", "ibp42s0", "a088:c203:00aa:0002"),
			wantErr: "rails[1] (rail 1) and rails[2] (rail 7) of the node configuration match the port"},
		{name: "by netdev pattern", port: port("mlx5_2", "0000:2b:00.0", "ibp42s1", ""), wantRail: 7, wantOK: true},
		{name: "on no rail", port: port("mlx5_9", "0000:ff:00.0", "ibp255s0", "")},
		{name: "a virtual device has no PCI address", port: port("rxe0", "", "eth0", "")},
	}
	c, err := Parse([]byte(pool))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rail, ok, err := c.RailOf(tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("RailOf = %d, %v, %v; want the error %q", rail, ok, err, tt.wantErr)
				}
				if ok {
					t.Errorf("RailOf reports rail %d with a conflict", rail)
				}
				return
			}
			if err != nil || ok != tt.wantOK || rail != tt.wantRail {
				t.Errorf("RailOf = %d, %v, %v; want %d, %v", rail, ok, err, tt.wantRail, tt.wantOK)
			}
		})
	}
}

func TestPortGUIDSelector(t *testing.T) {
	p := &discovery.Port{IBDev: "mlx5_0", Port: 1, PortGUID: "7c8c:0903:00c3:cfee"}
	noGUID := &discovery.Port{IBDev: "mlx5_1", Port: 1}
	for _, tt := range []struct {
		entry string
		want  bool
	}{
		{entry: "7c8c:0903:00c3:cfee", want: true},
		{entry: "0x7C8C090300C3CFEE", want: true},
		{entry: "7C8C:0903:*", want: true},
		{entry: "7c8c:0903:00c3:cfef"},
		{entry: "*", want: true},
	} {
		t.Run(tt.entry, func(t *testing.T) {
			c, err := Parse([]byte(fmt.Sprintf("include: [{portGUIDs: [%q]}]", tt.entry)))
			if err != nil {
				t.Fatal(err)
			}
			if got := c.Selects(p); got != tt.want {
				t.Errorf("Selects(port with GUID) = %v, want %v", got, tt.want)
			}
			if c.Selects(noGUID) {
				t.Error("a port without a GUID matches a portGUIDs entry")
			}
		})
	}
}

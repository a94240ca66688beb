package devicemodel

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// railPorts is four IB ports, each its own RDMA device, with their own netdevs and port
// GUIDs: mlx5_00 at 0000:01:00.0, netdev ibp1s0, GUID a088:c203:00aa:0000, and so on.
func railPorts() []discovery.Port {
	ports := manyPorts(4)
	for i := range ports {
		ports[i].Netdev = fmt.Sprintf("ibp%ds0", i+1)
		ports[i].PortGUID = fmt.Sprintf("a088:c203:00aa:%04x", i)
	}
	return ports
}

// parseConfig is the node configuration of a YAML file, as the plugin loads it.
func parseConfig(t *testing.T, data string) nodeconfig.Config {
	t.Helper()
	c, err := nodeconfig.Parse([]byte(data))
	if err != nil {
		t.Fatalf("node config: %v", err)
	}
	return c
}

func TestRails(t *testing.T) {
	const byFacts = `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:01:00.0"]}]}
- {rail: 1, selectors: [{ifNames: [ibp2s0]}]}
- {rail: 5, selectors: [{portGUIDs: ["0xA088C20300AA0002"]}]}
`
	const twoRails = `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:01:00.0", "0000:02:00.0"]}]}
- {rail: 1, selectors: [{pciAddresses: ["0000:03:00.0"]}]}
legacyResources:
- {name: rail0, selectors: {ibdevs: [mlx5_00, mlx5_01]}}
- {name: all}
- {name: one-without, selectors: {ibdevs: [mlx5_01, mlx5_03]}}
`
	tests := []struct {
		name   string
		config string
		legacy bool
		// want maps devices to their rail; -1 is a device without one. Devices not
		// listed are not looked at.
		want map[string]int
		// wantConflicts lists the ports published without a rail because two rails
		// match them, with the reason.
		wantConflicts []string
	}{
		{name: "no rails section: no rail", config: "shares: 4",
			want: map[string]int{"mlx5-00-p1": -1, "mlx5-00-p1-shared": -1}},
		{name: "every device of a port, by PCI address, netdev and port GUID", config: byFacts,
			want: map[string]int{
				"mlx5-00-p1": 0, "mlx5-00-p1-shared": 0, "mlx5-01-p1": 1, "mlx5-01-p1-shared": 1,
				"mlx5-02-p1": 5, "mlx5-02-p1-shared": 5, "mlx5-03-p1": -1, "mlx5-03-p1-shared": -1,
			}},
		{name: "legacy model: each single-share device", config: byFacts + "legacy: {shares: 2}", legacy: true,
			want: map[string]int{"mlx5-00-p1-s0": 0, "mlx5-00-p1-s1": 0, "mlx5-02-p1-s1": 5, "mlx5-03-p1-s0": -1}},
		{name: "legacy model, exclusive", config: byFacts + "legacy: {mode: exclusive}", legacy: true,
			want: map[string]int{"mlx5-00-p1": 0, "mlx5-01-p1": 1}},
		{name: "exclusive only", config: byFacts + "modes: exclusive",
			want: map[string]int{"mlx5-00-p1": 0, "mlx5-03-p1": -1}},
		{name: "legacy resource: a rail when all its ports agree", config: twoRails,
			want: map[string]int{"legacy-rail0": 0, "legacy-all": -1, "legacy-one-without": -1, "mlx5-03-p1": -1}},
		{name: "a port two rails match has none, and says which", config: `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:01:00.0"]}]}
- {rail: 1, selectors: [{ifNames: [ibp1s0, ibp2s0]}]}
legacyResources: [{name: first, selectors: {ibdevs: [mlx5_00]}}]
`,
			want:          map[string]int{"mlx5-00-p1": -1, "mlx5-00-p1-shared": -1, "legacy-first": -1, "mlx5-01-p1": 1},
			wantConflicts: []string{"mlx5_00/1: rails[0] (rail 0) and rails[1] (rail 1) of the node configuration match the port, and a port is on one rail: make their selectors disjoint"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(inventory(railPorts()...), Options{NodeName: "node-a", Legacy: tt.legacy, Config: parseConfig(t, tt.config)})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			got := map[string]int{}
			for name := range tt.want {
				got[name] = -1
				if v, ok := lookupAttr(device(t, res, name), AttrRail); ok {
					got[name] = int(*v.IntValue)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("rails (-want +got):\n%s", diff)
			}
			var conflicts []string
			for _, is := range res.Issues {
				if is.ConfigConflict {
					if is.Attribute != AttrRail {
						t.Errorf("conflict about %s, want %s", is.Attribute, AttrRail)
					}
					conflicts = append(conflicts, fmt.Sprintf("%s/%d: %s", is.IBDev, is.Port, is.Reason))
				}
			}
			if diff := cmp.Diff(tt.wantConflicts, conflicts); diff != "" {
				t.Errorf("conflicts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRailConflictLogged: a rail the configuration could not give is an error in the
// log, naming the port and the entries, and the port is still published.
func TestRailConflictLogged(t *testing.T) {
	cfg := parseConfig(t, `
rails:
- {rail: 0, selectors: [{pciAddresses: ["0000:01:00.0"]}]}
- {rail: 3, selectors: [{portGUIDs: ["a088:c203:00aa:*"]}]}
`)
	res, err := Build(inventory(railPorts()[:2]...), Options{NodeName: "node-a", Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	device(t, res, "mlx5-00-p1")
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	res.LogIssues(logger)
	var errs []string
	for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
		if e.Type == ktesting.LogError {
			errs = append(errs, fmt.Sprintf("%s %v", e.Message, e.ParameterKVList))
		}
	}
	want := []string{"Device attribute omitted: the node configuration conflicts [ibdev mlx5_00 port 1 attribute rdma.dra.io/rail reason " +
		"rails[0] (rail 0) and rails[1] (rail 3) of the node configuration match the port, and a port is on one rail: make their selectors disjoint]"}
	if diff := cmp.Diff(want, errs); diff != "" {
		t.Errorf("errors logged (-want +got):\n%s", diff)
	}
}

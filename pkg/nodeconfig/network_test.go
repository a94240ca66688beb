package nodeconfig

import (
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestAddressPoolValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want string // a part of the error; empty: valid
	}{
		{"valid", "- {subnet: 192.168.77.0/24, rangeStart: 192.168.77.10, rangeEnd: 192.168.77.20, exclude: [192.168.77.11]}", ""},
		{"ipv6", "- {subnet: 'fd00:77::/64'}", ""},
		{"large subnet without range end", "- {subnet: 10.0.0.0/8}", ""},
		{"same range on other nodes", "- {nodes: [a], subnet: 192.168.77.0/24}\n- {nodes: [b], subnet: 192.168.77.0/24}", ""},
		{"subnet with host bits", "- {subnet: 192.168.77.1/24}", `network.addressPools[0].subnet: Invalid value: "192.168.77.1/24": must be a prefix`},
		{"start outside", "- {subnet: 192.168.77.0/24, rangeStart: 192.168.78.1}", `network.addressPools[0].rangeStart: Invalid value: "192.168.78.1": must be an address in 192.168.77.0/24`},
		{"end before start", "- {subnet: 192.168.77.0/24, rangeStart: 192.168.77.20, rangeEnd: 192.168.77.10}", `network.addressPools[0].rangeEnd: Invalid value: "192.168.77.10": must not be before rangeStart 192.168.77.20`},
		{"too large", "- {subnet: '10.0.0.0/8', rangeEnd: 10.255.0.0}", "the range may hold at most 65536 addresses"},
		{"overlap on one node", "- {name: a, subnet: 192.168.77.0/24}\n- {name: b, subnet: 192.168.77.0/25}", `network.addressPools[1]: Invalid value: "b": its range overlaps the range of pool a`},
		{"bad node pattern", "- {nodes: ['gpu-['], subnet: 192.168.77.0/24}", `network.addressPools[0].nodes[0]: Invalid value: "gpu-["`},
		{"empty node name", "- {nodes: [a, ''], subnet: 192.168.77.0/24}", `network.addressPools[0].nodes[1]: Required value: a node name or shell pattern; leave nodes out for every node`},
		{"unknown field", "- {subnet: 192.168.77.0/24, gateway: 192.168.77.1}", `unknown field "network.addressPools[0].gateway"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte("network:\n  addressPools:\n" + indent(tc.yaml)))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestPoolFor(t *testing.T) {
	cfg, err := Parse([]byte(`
network:
  addressPools:
  - {name: a, nodes: [gpu-a-*], selector: {ifNames: [enp*]}, subnet: 192.168.77.0/24, rangeStart: 192.168.77.100, rangeEnd: 192.168.77.199}
  - {name: b, nodes: [gpu-b-*], subnet: 192.168.77.0/24, rangeStart: 192.168.77.200, rangeEnd: 192.168.77.250}
`))
	if err != nil {
		t.Fatal(err)
	}
	roce := &discovery.Port{IBDev: "mlx5_8", Port: 1, Netdev: "enp168s0f0np0", LinkLayer: discovery.LinkLayerEthernet}
	ib := &discovery.Port{IBDev: "mlx5_0", Port: 1, Netdev: "ibp24s0", LinkLayer: discovery.LinkLayerInfiniBand}
	for _, tc := range []struct {
		node string
		port *discovery.Port
		want string
	}{
		{"gpu-a-1", roce, "a 192.168.77.100"},
		{"gpu-a-1", ib, ""},
		{"gpu-b-7", ib, "b 192.168.77.200"},
		{"cpu-1", roce, ""},
	} {
		r, ok := cfg.PoolFor(tc.node, tc.port)
		got := ""
		if ok {
			got = r.Name + " " + r.Start.String()
		}
		if got != tc.want {
			t.Errorf("PoolFor(%s, %s): %q, want %q", tc.node, tc.port.Netdev, got, tc.want)
		}
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ") + "\n"
}

// TestDefaultRangeSkipsGateway: without rangeStart a pool starts at the subnet's second
// host address, since the first is by convention the segment's gateway; an explicit
// rangeStart, the first host address included, is honoured.
func TestDefaultRangeSkipsGateway(t *testing.T) {
	tests := []struct {
		name       string
		pool       string
		start, end string
	}{
		{"ipv4 /24", "{subnet: 192.168.77.0/24}", "192.168.77.2", "192.168.77.254"},
		{"ipv4 /30", "{subnet: 192.168.77.0/30}", "192.168.77.2", "192.168.77.2"},
		{"ipv4 /31 point to point", "{subnet: 192.168.77.0/31}", "192.168.77.1", "192.168.77.1"},
		{"ipv4 /32", "{subnet: 192.168.77.7/32}", "192.168.77.7", "192.168.77.7"},
		{"ipv6 /64", "{subnet: 'fd00:77::/64'}", "fd00:77::2", "fd00:77::1:1"},
		{"ipv6 /127", "{subnet: 'fd00:77::/127'}", "fd00:77::1", "fd00:77::1"},
		{"explicit first host address", "{subnet: 192.168.77.0/24, rangeStart: 192.168.77.1}", "192.168.77.1", "192.168.77.254"},
		{"explicit end only", "{subnet: 192.168.77.0/24, rangeEnd: 192.168.77.9}", "192.168.77.2", "192.168.77.9"},
	}
	port := &discovery.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: discovery.LinkLayerEthernet}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte("network:\n  addressPools:\n" + indent("- "+tc.pool)))
			if err != nil {
				t.Fatal(err)
			}
			r, ok := cfg.PoolFor("node-a", port)
			if !ok {
				t.Fatal("no pool for the port")
			}
			if got, want := r.Start.String()+" to "+r.End.String(), tc.start+" to "+tc.end; got != want {
				t.Errorf("range %s, want %s", got, want)
			}
		})
	}
}

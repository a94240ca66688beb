package podnet

import (
	"net/netip"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

func TestAllocate(t *testing.T) {
	cfg, err := nodeconfig.Parse([]byte(`
network:
  addressPools:
  - name: roce
    subnet: 192.168.77.0/24
    rangeStart: 192.168.77.10
    rangeEnd: 192.168.77.12
    exclude: [192.168.77.11]
  - subnet: fd00:77::/64
    rangeEnd: "fd00:77::2"
`))
	if err != nil {
		t.Fatal(err)
	}
	v4, ok := cfg.PoolFor("node-a", &discovery.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: discovery.LinkLayerEthernet})
	if !ok {
		t.Fatal("no pool for the port")
	}
	mustParse := netip.MustParseAddr
	tests := []struct {
		name  string
		r     nodeconfig.Range
		inUse []string
		want  string // empty: exhausted
	}{
		{"first", v4, nil, "192.168.77.10/24"},
		{"skips used and excluded", v4, []string{"192.168.77.10"}, "192.168.77.12/24"},
		{"exhausted", v4, []string{"192.168.77.10", "192.168.77.12"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			used := map[netip.Addr]bool{}
			for _, a := range tc.inUse {
				used[mustParse(a)] = true
			}
			got, err := allocateAddress(tc.r, used)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("got %s, want an error", got)
			case tc.want == "":
				if want := "address pool roce (192.168.77.10 to 192.168.77.12) has no free address"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			case err != nil:
				t.Fatal(err)
			case got.String() != tc.want:
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// The IPv6 pool starts after the subnet-router anycast address.
	v6 := cfg.Network.AddressPools[1]
	if v6.Name != "pool1" {
		t.Errorf("default name %q, want pool1", v6.Name)
	}
}

// TestAllocateSkipsNodeAddresses: an address the node holds (the port netdev's own
// address, a node IP) is never handed out, and neither is the gateway of a pool that
// leaves the range to its defaults.
func TestAllocateSkipsNodeAddresses(t *testing.T) {
	cfg, err := nodeconfig.Parse([]byte(`
network:
  addressPools:
  - {name: rail0, nodes: [node-a], subnet: 10.200.0.0/29}
  - {name: rail1, nodes: [other], subnet: 'fd00:77::/64', rangeEnd: 'fd00:77::3'}
`))
	if err != nil {
		t.Fatal(err)
	}
	port := &discovery.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: discovery.LinkLayerEthernet}
	v4, ok := cfg.PoolFor("node-a", port)
	if !ok {
		t.Fatal("no IPv4 pool for the port")
	}
	v6, ok := cfg.PoolFor("other", port)
	if !ok {
		t.Fatal("no IPv6 pool for the port")
	}
	addrs := func(ss ...string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			out = append(out, netip.MustParseAddr(s))
		}
		return out
	}
	tests := []struct {
		name  string
		r     nodeconfig.Range
		inUse []netip.Addr
		node  []netip.Addr
		want  string // empty: exhausted
	}{
		{"default range skips the gateway", v4, nil, nil, "10.200.0.2/29"},
		{"the port netdev's address", v4, nil, addrs("10.200.0.2"), "10.200.0.3/29"},
		{"node IPs and pod addresses", v4, addrs("10.200.0.3"), addrs("10.200.0.2", "10.200.0.4", "192.0.2.1"), "10.200.0.5/29"},
		{"node holds the rest", v4, nil, addrs("10.200.0.2", "10.200.0.3", "10.200.0.4", "10.200.0.5", "10.200.0.6"), ""},
		{"ipv6", v6, nil, addrs("fd00:77::2"), "fd00:77::3/64"},
		{"ipv4-mapped node address", v4, nil, addrs("::ffff:10.200.0.2"), "10.200.0.3/29"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			used := map[netip.Addr]bool{}
			for _, a := range tc.inUse {
				used[a] = true
			}
			got, err := allocateAddress(tc.r, used, tc.node...)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("got %s, want an error", got)
			case tc.want == "":
				if want := "address pool rail0 (10.200.0.2 to 10.200.0.6) has no free address"; err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			case err != nil:
				t.Fatal(err)
			case got.String() != tc.want:
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

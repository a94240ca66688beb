package nodeconfig

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// TestAllowedPoolFor: only the pools a class allows serve its claims, even when another
// pool matches the port first.
func TestAllowedPoolFor(t *testing.T) {
	cfg, err := Parse([]byte(`
network:
  addressPools:
  - {name: tenant-a, subnet: 192.168.77.0/24, rangeStart: 192.168.77.100, rangeEnd: 192.168.77.149}
  - {name: tenant-b, subnet: 192.168.77.0/24, rangeStart: 192.168.77.150, rangeEnd: 192.168.77.199}
  - {subnet: 192.168.78.0/24, selector: {ifNames: [ib*]}}
`))
	if err != nil {
		t.Fatal(err)
	}
	roce := &discovery.Port{IBDev: "mlx5_8", Port: 1, Netdev: "enp168s0f0np0", LinkLayer: discovery.LinkLayerEthernet}
	for _, tc := range []struct {
		name    string
		allowed []string
		want    string
	}{
		{"nothing allowed", nil, ""},
		{"the first pool", []string{"tenant-a"}, "tenant-a 192.168.77.100"},
		{"the second pool, though the first matches", []string{"tenant-b"}, "tenant-b 192.168.77.150"},
		{"both: the first in the node config's order", []string{"tenant-b", "tenant-a"}, "tenant-a 192.168.77.100"},
		{"a pool that does not select the port", []string{"pool2"}, ""},
		{"an unknown name", []string{"tenant-c"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, ok := cfg.AllowedPoolFor("node-a", roce, tc.allowed)
			got := ""
			if ok {
				got = r.Name + " " + r.Start.String()
			}
			if got != tc.want {
				t.Errorf("AllowedPoolFor(%v): %q, want %q", tc.allowed, got, tc.want)
			}
		})
	}
	for _, tc := range []struct {
		addr, want string
	}{{"192.168.77.120", "tenant-a"}, {"192.168.77.199", "tenant-b"}, {"192.168.77.200", ""}, {"192.168.78.7", "pool2"}, {"10.0.0.1", ""}} {
		name, _ := cfg.PoolContaining(netip.MustParseAddr(tc.addr))
		if name != tc.want {
			t.Errorf("PoolContaining(%s) = %q, want %q", tc.addr, name, tc.want)
		}
	}
	if got, want := cfg.PoolNames(), []string{"tenant-a", "tenant-b", "pool2"}; !slices.Equal(got, want) {
		t.Errorf("PoolNames: %v, want %v", got, want)
	}
}

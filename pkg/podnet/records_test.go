package podnet

import (
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestAddressPoolOfRecord: a record written with a policy takes addresses only from the
// pools it names, even where another pool selects the port first; a record of a plugin
// that predates the policy keeps the first pool that selects the port.
func TestAddressPoolOfRecord(t *testing.T) {
	pools, err := nodeconfig.Parse([]byte(`
network:
  addressPools:
  - {name: a, subnet: 192.168.77.0/24}
  - {name: b, subnet: 192.168.78.0/24}
`))
	if err != nil {
		t.Fatal(err)
	}
	port := &discovery.Port{IBDev: "mlx5_8", Port: 1, Netdev: "enp168s0f0np0", LinkLayer: discovery.LinkLayerEthernet}
	for _, tc := range []struct {
		name   string
		policy *checkpoint.NetworkPolicy
		want   string
	}{
		{"record without policy", nil, "a"},
		{"pool b allowed", &checkpoint.NetworkPolicy{AddressPools: []string{"b"}}, "b"},
		{"nothing allowed", &checkpoint.NetworkPolicy{}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nd := &checkpoint.NetworkDevice{Policy: tc.policy}
			r, ok := addressPool(nd, &pools, "node-1", port)
			if got := map[bool]string{true: r.Name}[ok]; got != tc.want {
				t.Errorf("pool %q, want %q", got, tc.want)
			}
		})
	}
}

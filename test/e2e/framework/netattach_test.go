package framework

import (
	"net/netip"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestParseIP parses what busybox's ip printed in a network namespace with a macvlan
// child (captured on the development VM).
func TestParseIP(t *testing.T) {
	link := `4: rdma0@vx1: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue qlen 1000\    link/ether 12:5c:0a:d3:16:f4 brd ff:ff:ff:ff:ff:ff` + "\n"
	addr := `4: rdma0    inet 10.200.0.100/24 scope global rdma0\       valid_lft forever preferred_lft forever
4: rdma0    inet6 fe80::105c:aff:fed3:16f4/64 scope link tentative \       valid_lft forever preferred_lft forever
`
	got, err := ParseIP("rdma0", link, addr)
	if err != nil {
		t.Fatal(err)
	}
	if got.MTU != 9000 || !got.Up || got.HardwareAddr != "12:5c:0a:d3:16:f4" || len(got.Addresses) != 1 || got.Addresses[0] != netip.MustParsePrefix("10.200.0.100/24") {
		t.Errorf("ParseIP = %+v", got)
	}
	if _, err := ParseIP("rdma0", "ip: can't find device 'rdma0'", ""); err == nil {
		t.Error("ParseIP of an error message: no error")
	}
}

func TestInPool(t *testing.T) {
	pool := nodeconfig.AddressPool{Name: "p", Subnet: "10.200.0.0/24", RangeStart: "10.200.0.100", RangeEnd: "10.200.0.199", Exclude: []string{"10.200.0.150"}}
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"10.200.0.100/24", true}, {"10.200.0.199/24", true}, {"10.200.0.11/24", false},
		{"10.200.0.150/24", false}, {"10.200.0.120/16", false}, {"10.201.0.120/24", false},
	} {
		if err := InPool(pool, netip.MustParsePrefix(tc.addr)); (err == nil) != tc.ok {
			t.Errorf("InPool(%s) = %v, want ok=%v", tc.addr, err, tc.ok)
		}
	}
}

func TestRoCEv2Index(t *testing.T) {
	v4 := netip.MustParseAddr("10.200.0.100")
	table := []GIDEntry{
		{Index: 2, GID: netip.AddrFrom16(netip.MustParseAddr("10.200.0.11").As16()), Type: "RoCE v2", Ndev: "enp168s0f0np0"},
		{Index: 4, GID: netip.AddrFrom16(v4.As16()), Type: "IB/RoCE v1", Ndev: "rdma0"},
		{Index: 5, GID: netip.AddrFrom16(v4.As16()), Type: "RoCE v2", Ndev: "rdma0"},
	}
	if got := RoCEv2Index(table, "rdma0", v4); got != 5 {
		t.Errorf("RoCEv2Index = %d, want 5", got)
	}
	if got := RoCEv2Index(table, "rdma1", v4); got != -1 {
		t.Errorf("RoCEv2Index on another netdev = %d, want -1", got)
	}
}

package rdmacore

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestParseDevinfo(t *testing.T) {
	// What ibv_devinfo -v of rdma-core 44 printed for an rxe device over a veth with an
	// IPv4 and an IPv6 address, in the real-kernel VM.
	data, err := os.ReadFile("testdata/ibv_devinfo-rxe.txt")
	if err != nil {
		t.Fatal(err)
	}
	devs, err := ParseDevinfo(string(data))
	if err != nil {
		t.Fatal(err)
	}
	want := []Device{{
		Name: "rxe0", FWVer: "0.0.0", NodeGUID: "746f:4dff:fec9:bba6", SysImageGUID: "746f:4dff:fec9:bba6",
		VendorID: "0xffffff", PhysPortCnt: 1,
		Ports: []Port{{
			Number: 1, State: 4, StateName: "PORT_ACTIVE", PhysState: 5, PhysStateName: "LINK_UP",
			LinkLayer: "Ethernet", Width: 1, LaneGbps: 10,
			GIDs: []GID{
				{0, netip.MustParseAddr("fe80::746f:4dff:fec9:bba6"), "RoCE v2"},
				{1, netip.MustParseAddr("::ffff:192.168.77.10"), "RoCE v2"},
				{2, netip.MustParseAddr("fd00:77::10"), "RoCE v2"},
			},
		}},
	}}
	if diff := cmp.Diff(want, devs, cmpopts.EquateComparable(netip.Addr{})); diff != "" {
		t.Errorf("ParseDevinfo (-want +got):\n%s", diff)
	}
}

func TestParseDevinfoErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"GID outside a port", "hca_id:\trxe0\n\t\t\tGID[  0]:\t\tfe80::1, RoCE v2\n", "line 2: GID outside a port"},
		{"bad GID", "hca_id:\trxe0\n\t\tport:\t1\n\t\t\tGID[  3]:\t\tnot-an-address, RoCE v2\n", "line 3: GID 3"},
		{"state without number", "hca_id:\trxe0\n\t\tport:\t1\n\t\t\tstate:\t\tPORT_ACTIVE\n", "line 3: state of rxe0 port 1"},
		{"unknown width", "hca_id:\trxe0\n\t\tport:\t1\n\t\t\tactive_width:\t\tWIDE (9)\n", `width "WIDE"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseDevinfo(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestParseNetnsMode(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"netns shared copy-on-fork on\n", "shared", ""},
		{"netns exclusive copy-on-fork on\n", "exclusive", ""},
		{"netns odd\n", "", "unknown netns mode"},
		{"copy-on-fork on\n", "", "no netns mode"},
	} {
		got, err := ParseNetnsMode(tc.in)
		if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) || got != tc.want {
			t.Errorf("ParseNetnsMode(%q) = %q, %v; want %q, error with %q", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestRoCEv2GIDIndex(t *testing.T) {
	gid := func(i int, a, typ string) GID { return GID{i, netip.MustParseAddr(a), typ} }
	for _, tc := range []struct {
		name string
		gids []GID
		want int
	}{
		{"IPv4 wins over a lower IPv6", []GID{gid(0, "fe80::1", "RoCE v2"), gid(1, "fd00::1", "RoCE v2"), gid(2, "::ffff:10.0.0.1", "RoCE v2")}, 2},
		{"RoCE v1 does not count", []GID{gid(0, "::ffff:10.0.0.1", "RoCE v1"), gid(1, "::ffff:10.0.0.1", "RoCE v2")}, 1},
		{"global IPv6 when no IPv4", []GID{gid(0, "fe80::1", "RoCE v2"), gid(3, "2001:db8::1", "RoCE v2")}, 3},
		{"link-local only", []GID{gid(0, "fe80::1", "RoCE v2")}, -1},
		{"IPv4 link-local does not count", []GID{gid(0, "::ffff:169.254.3.4", "RoCE v2"), gid(1, "2001:db8::1", "RoCE v2")}, 1},
		{"empty", nil, -1},
	} {
		if got := RoCEv2GIDIndex(tc.gids); got != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got, tc.want)
		}
	}
}

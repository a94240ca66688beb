package netattach

// Move-mode tests against the real kernel, in the private namespaces of real_test.go:
// what a move must refuse, and what it must give back.

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// TestRealMoveRefusesStackedPort stacks a device on the port (a macvlan, with or
// without a node IP, or a bridge the port is enslaved to) and checks that a move is
// refused before anything changes, and that a veth peer is not taken for an upper.
func TestRealMoveRefusesStackedPort(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, f *realFixture, port netlink.Link)
		want  error
		text  string
	}{{
		name: "macvlan with the node IP",
		setup: func(t *testing.T, f *realFixture, port netlink.Link) {
			mv := realMacvlan(t, f, port, "rmv0")
			if err := f.hh.AddrAdd(mv, &netlink.Addr{IPNet: toIPNet(netip.MustParsePrefix("192.0.2.77/24"))}); err != nil {
				t.Fatal(err)
			}
			f.a.nodeIPs = append(f.a.nodeIPs, netip.MustParseAddr("192.0.2.77"))
		},
		want: ErrPrimaryInterface, text: "rmv0 has the node IP 192.0.2.77",
	}, {
		name:  "macvlan without an address",
		setup: func(t *testing.T, f *realFixture, port netlink.Link) { realMacvlan(t, f, port, "rmv0") },
		want:  ErrUpperDevice, text: "rmv0 (macvlan)",
	}, {
		name: "bridge master",
		setup: func(t *testing.T, f *realFixture, port netlink.Link) {
			if err := f.hh.LinkAdd(&netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: "rbr0"}}); err != nil {
				t.Fatal(err)
			}
			br, err := f.hh.LinkByName("rbr0")
			if err != nil {
				t.Fatal(err)
			}
			if err := f.hh.LinkSetMaster(port, br); err != nil {
				t.Fatal(err)
			}
		},
		want: ErrUpperDevice, text: "rbr0 (bridge)",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newRealFixture(t)
			port, err := f.hh.LinkByName(realPort)
			if err != nil {
				t.Fatal(err)
			}
			tc.setup(t, f, port)
			before, podBefore := dumpNS(t, f.hh), dumpNS(t, f.ph)
			var j journal
			_, err = f.a.Attach(ctx, Spec{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1"}, f.target, j.save)
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Attach = %v, want %v containing %q", err, tc.want, tc.text)
			}
			if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
				t.Errorf("a refused move changed the host (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(podBefore, dumpNS(t, f.ph)); diff != "" {
				t.Errorf("a refused move changed the pod (-before +after):\n%s", diff)
			}
		})
	}
	t.Run("veth peers are no uppers", func(t *testing.T) {
		f := newRealFixture(t)
		// rprim0's peer is in the same namespace, rport0's in another: the kernel reports
		// both as IFLA_LINK.
		for _, name := range []string{realPrimary, realPort} {
			if err := CheckNoUppers(handle{f.hh}, name); err != nil {
				t.Errorf("CheckNoUppers(%s) = %v, want nil", name, err)
			}
		}
	})
}

func realMacvlan(t *testing.T, f *realFixture, parent netlink.Link, name string) netlink.Link {
	t.Helper()
	err := f.hh.LinkAdd(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE})
	if err != nil {
		t.Fatal(err)
	}
	l, err := f.hh.LinkByName(name)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.hh.LinkSetUp(l); err != nil {
		t.Fatal(err)
	}
	return l
}

// TestRealMoveRestoresEveryTable gives the port routes in tables other than main (a
// rail's default route and its subnet in table 100, an IPv6 route in table 1001), moves
// it with and without the host's addresses, and checks that the pod gets none of them
// and that Detach restores them exactly.
func TestRealMoveRestoresEveryTable(t *testing.T) {
	for _, keep := range []bool{true, false} {
		t.Run(fmt.Sprintf("keepHostAddress=%v", keep), func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newRealFixture(t)
			port, err := f.hh.LinkByName(realPort)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range []*netlink.Route{
				{Table: 100, Dst: toIPNet(netip.MustParsePrefix("0.0.0.0/0")), Gw: net.ParseIP(peerAddr), Protocol: unix.RTPROT_STATIC},
				{Table: 100, Dst: toIPNet(netip.MustParsePrefix("192.0.2.0/24")), Scope: netlink.SCOPE_LINK, Src: net.ParseIP("192.0.2.1")},
				{Table: 1001, Dst: toIPNet(netip.MustParsePrefix("2001:db8:3::/48")), Gw: net.ParseIP("2001:db8:1::fe"), Priority: 30, Protocol: unix.RTPROT_STATIC},
			} {
				r.LinkIndex = port.Attrs().Index
				if err := f.hh.RouteAdd(r); err != nil {
					t.Fatalf("add route %v: %v", r, err)
				}
			}
			before, tables := dumpNS(t, f.hh), dumpTables(t, f.hh)
			if strings.Count(tables, "\n") != 2 {
				t.Fatalf("the fixture's tables:\n%s", tables)
			}
			spec := Spec{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1", KeepHostAddress: keep}
			if !keep {
				spec.Addresses = prefixes("192.0.2.50/24")
			}
			var j journal
			st, err := f.a.Attach(ctx, spec, f.target, j.save)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			if got := dumpTables(t, f.hh); got != "" {
				t.Errorf("the host's tables still have routes through the moved port:\n%s", got)
			}
			if got := dumpTables(t, f.ph); got != "" {
				t.Errorf("the pod got routes in tables other than main:\n%s", got)
			}
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
				t.Errorf("host's main table after Detach (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tables, dumpTables(t, f.hh)); diff != "" {
				t.Errorf("host's other tables after Detach (-before +after):\n%s", diff)
			}
		})
	}
}

// dumpTables is a canonical text of the routes of a real namespace in tables other than
// main and local (the kernel's), without link-local and multicast destinations.
func dumpTables(t testing.TB, h *netlink.Handle) string {
	t.Helper()
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, r := range routes {
		if r.Table == unix.RT_TABLE_MAIN || r.Table == unix.RT_TABLE_LOCAL ||
			r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		l, err := h.LinkByIndex(r.LinkIndex)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, fmt.Sprintf("table %d %v via %v src %v dev %s proto %d metric %d scope %d",
			r.Table, r.Dst, r.Gw, r.Src, l.Attrs().Name, r.Protocol, r.Priority, r.Scope))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// TestRealMoveTamperedByPod does in the pod what a pod with NET_ADMIN can: rename the
// moved netdev, give it another MAC, bring it up, give its temporary name to a veth of
// its own, stack a macvlan on it (which the kernel keeps in the pod when the lower
// leaves). Detach must still give the netdev back to the host exactly as it was, and
// leave nothing in the pod on it.
func TestRealMoveTamperedByPod(t *testing.T) {
	for _, tc := range []struct {
		name         string
		squat, stack bool
	}{
		{name: "renamed and re-addressed"},
		{name: "temporary name taken", squat: true},
		{name: "macvlan stacked on it", stack: true},
	} {
		squat := tc.squat
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newRealFixture(t)
			before := dumpNS(t, f.hh)
			var j journal
			st, err := f.a.Attach(ctx, Spec{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1", KeepHostAddress: true}, f.target, j.save)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			l, err := f.ph.LinkByName("net1")
			if err != nil {
				t.Fatal(err)
			}
			for _, step := range []func() error{
				func() error { return f.ph.LinkSetDown(l) },
				func() error { return f.ph.LinkSetHardwareAddr(l, net.HardwareAddr{0x02, 0x66, 0, 0, 0, 1}) },
				func() error { return f.ph.LinkSetName(l, "evil0") },
				func() error { return f.ph.LinkSetUp(l) },
			} {
				if err := step(); err != nil {
					t.Fatalf("tamper in the pod: %v", err)
				}
			}
			if squat {
				if err := f.ph.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: st.TempName}, PeerName: "squat1"}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.stack {
				err := f.ph.LinkAdd(&netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: "spy0", ParentIndex: l.Attrs().Index}, Mode: netlink.MACVLAN_MODE_PASSTHRU})
				if err != nil {
					t.Fatal(err)
				}
			}
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
				t.Errorf("host after Detach (-before +after):\n%s", diff)
			}
			if pod := dumpNS(t, f.ph); strings.Contains(pod, "evil0") || strings.Contains(pod, "spy0") || squat != strings.Contains(pod, st.TempName) {
				t.Errorf("the pod still has the netdev or a device on it, or lost its own link %s:\n%s", st.TempName, pod)
			}
		})
	}
}

// TestRealAttachRefusesNodeAddresses checks the node boundary against the real kernel's
// dumps: the node IP, the gateway of a main and of a table-100 route, and a default
// route are refused before the host or the pod changes.
func TestRealAttachRefusesNodeAddresses(t *testing.T) {
	for _, tc := range []struct {
		name   string
		addrs  []netip.Prefix
		routes []Route
		text   string
	}{
		{name: "the node IP", addrs: prefixes("203.0.113.5/24"), text: "refuse pod address 203.0.113.5/24: reserved for the node: " + realPrimary + " has it, a node IP"},
		{name: "the port's own address", addrs: prefixes("2001:db8:1::1/64"), text: realPort + " has it"},
		{name: "a gateway of the main table", addrs: prefixes(peerAddr + "/24"), text: "the gateway of the host's route 198.51.100.0/24 on " + realPort},
		{name: "a gateway of table 100", addrs: prefixes("192.0.2.253/24"), text: "on " + realPort + " (table 100)"},
		{name: "a default route", addrs: prefixes("192.0.2.10/24"), routes: []Route{route("0.0.0.0/0", peerAddr)}, text: "refuse pod route 0.0.0.0/0: reserved for the node: it contains 192.0.2.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newRealFixture(t)
			port, err := f.hh.LinkByName(realPort)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.hh.RouteAdd(&netlink.Route{LinkIndex: port.Attrs().Index, Table: 100, Dst: toIPNet(netip.MustParsePrefix("0.0.0.0/0")),
				Gw: net.ParseIP("192.0.2.253")}); err != nil {
				t.Fatal(err)
			}
			before, podBefore := dumpNS(t, f.hh), dumpNS(t, f.ph)
			var j journal
			_, err = f.a.Attach(ctx, Spec{Mode: ModeMacvlan, HostNetdev: realPort, PodIfName: "net1", Addresses: tc.addrs, Routes: tc.routes}, f.target, j.save)
			if !errors.Is(err, ErrNodeAddress) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Attach = %v, want ErrNodeAddress containing %q", err, tc.text)
			}
			if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
				t.Errorf("a refused attach changed the host (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(podBefore, dumpNS(t, f.ph)); diff != "" || len(j.saved) != 0 {
				t.Errorf("a refused attach saved %d states or changed the pod (-before +after):\n%s", len(j.saved), diff)
			}
		})
	}
}

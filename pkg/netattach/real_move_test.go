package netattach

// Move-mode tests against the real kernel, in the private namespaces of real_test.go:
// what a move must refuse, and what it must give back.

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vishvananda/netlink"
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

package netattach

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestCheckNotPrimary(t *testing.T) {
	nodeIP := netip.MustParseAddr("10.0.0.5")
	for _, tc := range []struct {
		name    string
		setup   func(w *fakeWorld)
		netdev  string
		nodeIPs []netip.Addr
		text    string // "" = allowed
	}{
		{name: "RoCE port without node traffic", netdev: roceNetdev, nodeIPs: []netip.Addr{nodeIP}},
		{name: "default route", netdev: "eth0", text: "eth0 carries the default route (via 10.0.0.1)"},
		{name: "node IP", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("10.1.0.10")}, text: "has the node IP 10.1.0.10"},
		{name: "IPv6 node IP", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("2001:db8:1::10")}, text: "has the node IP 2001:db8:1::10",
			setup: func(w *fakeWorld) { w.addAddr(w.byName(rootFD, roceNetdev), "2001:db8:1::10/64") }},
		{name: "IPv6 default route", netdev: roceNetdev, text: "carries the default route",
			setup: func(w *fakeWorld) {
				l := w.byName(rootFD, roceNetdev)
				w.addAddr(l, "2001:db8:1::10/64")
				w.addRoute(l, "::/0", "2001:db8:1::1", unix.RTPROT_RA)
			}},
		{name: "slave of a bond with the default route", netdev: "ens1f1np1", text: "bond0 carries the default route",
			setup: func(w *fakeWorld) { w.addRoute(w.byName(rootFD, "bond0"), "0.0.0.0/0", "10.3.0.1", unix.RTPROT_DHCP) }},
		{name: "bond whose slave has the node IP", netdev: "bond0", nodeIPs: []netip.Addr{netip.MustParseAddr("10.3.0.9")}, text: "ens1f0np0 has the node IP 10.3.0.9",
			setup: func(w *fakeWorld) { w.addAddr(w.byName(rootFD, "ens1f0np0"), "10.3.0.9/24") }},
		{name: "bond with the node IP, other slave taken", netdev: "ens1f0np0", nodeIPs: []netip.Addr{netip.MustParseAddr("10.3.0.5")}, text: "bond0 has the node IP"},
		{name: "unknown netdev", netdev: "nosuch0", text: "look up nosuch0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f.w)
			}
			ns, _ := fakeNamespaces{f.w}.Host(t.Context())
			err := CheckNotPrimary(ns.Netlink(), tc.netdev, tc.nodeIPs)
			if tc.text == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), tc.netdev) {
				t.Fatalf("error %v, want one naming %s and containing %q", err, tc.netdev, tc.text)
			}
			if strings.HasPrefix(tc.name, "unknown") == errors.Is(err, ErrPrimaryInterface) {
				t.Errorf("errors.Is(ErrPrimaryInterface) = %v for %v", !strings.HasPrefix(tc.name, "unknown"), err)
			}
		})
	}
}

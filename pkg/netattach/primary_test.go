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
		{name: "node IP on a macvlan of the port", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("10.1.0.77")}, text: "mv0 has the node IP 10.1.0.77",
			setup: func(w *fakeWorld) {
				w.addAddr(w.addChild(rootFD, "macvlan", "mv0", "02:00:00:00:00:0c", roceNetdev), "10.1.0.77/24")
			}},
		{name: "default route through a VLAN of the port", netdev: roceNetdev, text: "vlan100 carries the default route (via 10.5.0.1)",
			setup: func(w *fakeWorld) {
				v := w.addChild(rootFD, "vlan", "vlan100", roceMAC, roceNetdev)
				w.addAddr(v, "10.5.0.2/24")
				w.addRoute(v, "0.0.0.0/0", "10.5.0.1", unix.RTPROT_DHCP)
			}},
		{name: "node IP on a macvlan of a VLAN of the port", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("10.5.0.9")}, text: "mv1 has the node IP 10.5.0.9",
			setup: func(w *fakeWorld) {
				w.addChild(rootFD, "vlan", "vlan100", roceMAC, roceNetdev)
				w.addAddr(w.addChild(rootFD, "macvlan", "mv1", "02:00:00:00:00:0d", "vlan100"), "10.5.0.9/24")
			}},
		{name: "node IP on an ipvlan of the bond the port is a slave of", netdev: "ens1f1np1", nodeIPs: []netip.Addr{netip.MustParseAddr("10.7.0.5")}, text: "iv7 has the node IP 10.7.0.5",
			setup: func(w *fakeWorld) {
				w.addAddr(w.addChild(rootFD, "ipvlan", "iv7", "5c:25:73:0a:00:00", "bond0"), "10.7.0.5/24")
			}},
		{name: "a veth whose peer has the port's index is no upper", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("10.6.0.5")},
			setup: func(w *fakeWorld) {
				w.addAddr(w.addChild(rootFD, "veth", "veth0", "02:00:00:00:00:0e", roceNetdev), "10.6.0.5/24")
			}},
		{name: "a child whose parent is in another namespace is no upper", netdev: roceNetdev, nodeIPs: []netip.Addr{netip.MustParseAddr("10.6.0.5")},
			setup: func(w *fakeWorld) {
				mv := w.addChild(rootFD, "macvlan", "mvx", "02:00:00:00:00:0f", roceNetdev)
				mv.attrs.NetNsID = 3 // IFLA_LINK is an index of namespace 3, not of this one
				w.addAddr(mv, "10.6.0.5/24")
			}},
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

func TestCheckNoUppers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(w *fakeWorld)
		netdev string
		text   string // "" = allowed
	}{
		{name: "port without uppers", netdev: roceNetdev},
		{name: "macvlan on the port", netdev: roceNetdev, text: "mv0 (macvlan)",
			setup: func(w *fakeWorld) { w.addChild(rootFD, "macvlan", "mv0", "02:00:00:00:00:0c", roceNetdev) }},
		{name: "VLAN on the port and an ipvlan on the VLAN", netdev: roceNetdev, text: "vlan100 (vlan), iv1 (ipvlan)",
			setup: func(w *fakeWorld) {
				w.addChild(rootFD, "vlan", "vlan100", roceMAC, roceNetdev)
				w.addChild(rootFD, "ipvlan", "iv1", roceMAC, "vlan100")
			}},
		{name: "slave of a bond", netdev: "ens1f0np0", text: "bond0 (bond)"},
		{name: "port of a bridge", netdev: roceNetdev, text: "br0 (bridge)",
			setup: func(w *fakeWorld) {
				br := w.addLink(rootFD, "bridge", "br0", roceMAC, 9000, true, "")
				w.byName(rootFD, roceNetdev).attrs.MasterIndex = br.attrs.Index
			}},
		{name: "a veth whose peer has the port's index is no upper", netdev: roceNetdev,
			setup: func(w *fakeWorld) { w.addChild(rootFD, "veth", "veth0", "02:00:00:00:00:0e", roceNetdev) }},
		{name: "a child whose parent is in another namespace is no upper", netdev: roceNetdev,
			setup: func(w *fakeWorld) {
				w.addChild(rootFD, "macvlan", "mvx", "02:00:00:00:00:0f", roceNetdev).attrs.NetNsID = 3
			}},
		{name: "children in a pod are not the host's", netdev: roceNetdev,
			setup: func(w *fakeWorld) {
				mv := w.addChild(rootFD, "macvlan", "net1", "02:00:00:00:00:10", roceNetdev)
				mv.ns = w.paths[podPath]
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f.w)
			}
			ns, _ := fakeNamespaces{f.w}.Host(t.Context())
			err := CheckNoUppers(ns.Netlink(), tc.netdev)
			if tc.text == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUpperDevice) || !strings.Contains(err.Error(), tc.text) || !strings.Contains(err.Error(), tc.netdev) {
				t.Fatalf("error %v, want ErrUpperDevice naming %s and %q", err, tc.netdev, tc.text)
			}
		})
	}
}

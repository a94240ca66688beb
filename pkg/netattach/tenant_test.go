package netattach

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// TestAttachRefusesNodeAddresses gives Attach specs whose addresses or routes (as the
// claim's config or IPAM could) reach what the node holds: each must be refused before
// anything is saved or changed, naming the address and why; what only looks similar
// must still attach.
func TestAttachRefusesNodeAddresses(t *testing.T) {
	macvlan := func(addrs []netip.Prefix, routes ...Route) Spec {
		return Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: addrs, Routes: routes}
	}
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		spec  Spec
		text  []string // nil: allowed
	}{{
		name: "the node IP",
		spec: macvlan(prefixes("10.0.0.5/24")),
		text: []string{"refuse pod address 10.0.0.5/24", "eth0 has it, a node IP"},
	}, {
		name: "the parent's own host address",
		spec: macvlan(prefixes("10.1.0.10/24")),
		text: []string{"refuse pod address 10.1.0.10/24", roceNetdev + " has it"},
	}, {
		name: "an address of another host link, ipvlan",
		spec: Spec{Mode: ModeIPVlan, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: prefixes("10.3.0.5/24")},
		text: []string{"refuse pod address 10.3.0.5/24", "bond0 has it"},
	}, {
		name:  "a node IP on no link",
		setup: func(f *fixture) { f.a.nodeIPs = append(f.a.nodeIPs, netip.MustParseAddr("10.1.0.99")) },
		spec:  macvlan(prefixes("10.1.0.99/24")),
		text:  []string{"refuse pod address 10.1.0.99/24", "a node IP"},
	}, {
		name: "an IPv6 host address",
		setup: func(f *fixture) {
			f.w.addAddr(f.w.byName(rootFD, roceNetdev), "2001:db8:1::10/64")
		},
		spec: macvlan(prefixes("10.1.0.100/24", "2001:db8:1::10/64")),
		text: []string{"refuse pod address 2001:db8:1::10/64", roceNetdev + " has it"},
	}, {
		name: "the gateway of a host route",
		spec: macvlan(prefixes("10.1.0.1/24")),
		text: []string{"refuse pod address 10.1.0.1/24", "the gateway of the host's route 10.2.0.0/16 on " + roceNetdev},
	}, {
		name: "the gateway of a host route in a rail's table",
		setup: func(f *fixture) {
			f.w.addTableRoute(f.w.byName(rootFD, roceNetdev), 100, "0.0.0.0/0", "10.1.0.254", unix.RTPROT_STATIC)
		},
		spec: macvlan(prefixes("10.1.0.254/24")),
		text: []string{"refuse pod address 10.1.0.254/24", "route 0.0.0.0/0 on " + roceNetdev + " (table 100)"},
	}, {
		name: "a route over the node IP",
		spec: macvlan(prefixes("10.1.0.100/24"), route("10.0.0.0/8", "10.1.0.1")),
		text: []string{"refuse pod route 10.0.0.0/8", "it contains 10.0.0.5 (eth0 has it, a node IP)"},
	}, {
		name: "a default route",
		spec: macvlan(prefixes("10.1.0.100/24"), route("0.0.0.0/0", "10.1.0.1")),
		text: []string{"refuse pod route 0.0.0.0/0", "it contains 10.0.0.5"},
	}, {
		name: "a route through the node",
		spec: macvlan(prefixes("10.1.0.100/24"), route("10.9.0.0/16", "10.1.0.10")),
		text: []string{"refuse pod route 10.9.0.0/16 via 10.1.0.10", "its gateway is the node's (" + roceNetdev + " has it)"},
	}, {
		name: "a move given the netdev's own address without keepHostAddress",
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: prefixes("10.1.0.10/24")},
		text: []string{"refuse pod address 10.1.0.10/24", roceNetdev + " has it"},
	}, {
		name: "an IPoIB child given the node IP",
		spec: Spec{Mode: ModeIPoIB, HostNetdev: "ibp12s0", PodIfName: "ib0", Addresses: prefixes("10.0.0.5/24")},
		text: []string{"refuse pod address 10.0.0.5/24"},
	}, {
		name: "every violation at once",
		spec: macvlan(prefixes("10.0.0.5/24", "10.1.0.1/24"), route("0.0.0.0/0", "10.1.0.1"), route("10.9.0.0/16", "10.3.0.5")),
		text: []string{"refuse pod address 10.0.0.5/24", "refuse pod address 10.1.0.1/24", "refuse pod route 0.0.0.0/0", "refuse pod route 10.9.0.0/16 via 10.3.0.5"},
	}, {
		name: "allowed: the rail's gateway as a route's gateway",
		spec: macvlan(prefixes("10.1.0.100/24"), route("10.9.0.0/16", "10.1.0.1")),
	}, {
		name: "allowed: keepHostAddress takes the netdev's own address and a route over it",
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true,
			Addresses: prefixes("10.1.0.10/24"), Routes: []Route{route("10.1.0.0/16", "10.1.0.1")}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.world(t)
			var j journal
			st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
			if tc.text == nil {
				if err != nil {
					t.Fatalf("Attach: %v", err)
				}
				if err := f.a.Detach(ctx, st, j.save); err != nil {
					t.Fatalf("Detach: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNodeAddress) {
				t.Fatalf("Attach = %v, want an error wrapping ErrNodeAddress", err)
			}
			for _, want := range tc.text {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if f.w.opCount != 0 || len(j.saved) != 0 || st.Phase != "" {
				t.Errorf("a refused Attach made %d operations (%v) and %d saves, phase %q; want none", f.w.opCount, f.w.ops, len(j.saved), st.Phase)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("a refused Attach changed the world (-before +after):\n%s", diff)
			}
		})
	}
}

// TestNodeAddresses: what an allocator must skip is exactly what Attach refuses: every
// address of the host's links, the node IPs (on a link or not) and the gateways of the
// host's routes in every table, sorted, each once.
func TestNodeAddresses(t *testing.T) {
	f := newFixture(t)
	f.a.nodeIPs = append(f.a.nodeIPs, netip.MustParseAddr("10.1.0.99"))
	f.w.addTableRoute(f.w.byName(rootFD, roceNetdev), 100, "0.0.0.0/0", "10.1.0.254", unix.RTPROT_STATIC)
	got, err := f.a.NodeAddresses(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Addr{
		netip.MustParseAddr("10.0.0.1"),   // eth0's default gateway
		netip.MustParseAddr("10.0.0.5"),   // eth0, a node IP
		netip.MustParseAddr("10.1.0.1"),   // the gateway of 10.2.0.0/16
		netip.MustParseAddr("10.1.0.10"),  // the RoCE port's host address
		netip.MustParseAddr("10.1.0.99"),  // a node IP on no link
		netip.MustParseAddr("10.1.0.254"), // a gateway in table 100
		netip.MustParseAddr("10.3.0.5"),   // bond0
	}
	if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
		t.Errorf("NodeAddresses (-want +got):\n%s", diff)
	}
	for _, a := range got {
		spec := Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: []netip.Prefix{netip.PrefixFrom(a, 24)}}
		if _, err := f.a.Attach(context.Background(), spec, f.target, func(State) error { return nil }); !errors.Is(err, ErrNodeAddress) {
			t.Errorf("Attach with %s: %v, want ErrNodeAddress", a, err)
		}
	}
}

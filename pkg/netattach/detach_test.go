package netattach

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// TestDetachRefusesHostNamespace detaches States whose pod namespace is the host's own
// (a damaged or foreign journal; Attach never writes one): Detach must refuse before it
// changes anything, whatever the State names.
func TestDetachRefusesHostNamespace(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		st   func(f *fixture) State
	}{{
		name: "move naming the primary netdev",
		path: "/host",
		st: func(f *fixture) State {
			return State{Spec: Spec{Mode: ModeMove, HostNetdev: "eth0", PodIfName: "eth0"}, Phase: PhaseAttached,
				TempName: "rdt0badc0de", Host: &HostSnapshot{Name: "eth0", HardwareAddr: "52:54:00:00:00:01", Type: "device", MTU: 1500, Up: true}}
		},
	}, {
		name: "macvlan naming a host macvlan, through another path",
		path: "/proc/1/ns/net",
		st: func(f *fixture) State {
			mv := f.w.addChild(rootFD, "macvlan", "mv0", "02:00:00:00:00:0c", roceNetdev)
			f.w.addAddr(mv, "10.1.0.20/24")
			return State{Spec: Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "mv0"}, Phase: PhaseAttached,
				TempName: "rdt0badc0de", HardwareAddr: "02:00:00:00:00:0c"}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			f.w.paths["/proc/1/ns/net"] = rootFD
			st := tc.st(f)
			st.Target = Target{PodUID: "damaged", NetnsPath: tc.path}
			before := f.world(t)
			var j journal
			if err := f.a.Detach(ctx, st, j.save); !errors.Is(err, ErrHostNamespace) {
				t.Errorf("Detach = %v, want an error wrapping ErrHostNamespace", err)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("Detach changed the host (-before +after):\n%s", diff)
			}
		})
	}
}

// TestMoveRestoresEveryTable moves a port with routes in tables other than main (per-rail
// policy routing, a rail's own default route among them) and checks that they come back
// exactly, and that only the main table's go into the pod with KeepHostAddress.
func TestMoveRestoresEveryTable(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec Spec
		pod  []string
	}{
		{name: "keeping the host address", pod: []string{"10.2.0.0/16 gw 10.1.0.1"},
			spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true, IBDevice: ibdev}},
		{name: "with a static address",
			spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: prefixes("10.1.0.50/24"), IBDevice: ibdev}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			roce := f.w.byName(rootFD, roceNetdev)
			f.w.addAddr(roce, "2001:db8:1::10/64")
			if err := f.kernel.AddressAdded(ctx, ibdev, 1, roceNetdev, netip.MustParseAddr("2001:db8:1::10")); err != nil {
				t.Fatal(err)
			}
			f.w.addTableRoute(roce, 100, "0.0.0.0/0", "10.1.0.1", unix.RTPROT_STATIC)
			f.w.addTableRoute(roce, 100, "10.1.0.0/24", "", unix.RTPROT_BOOT)
			f.w.addTableRoute(roce, 1001, "2001:db8:2::/48", "2001:db8:1::1", unix.RTPROT_STATIC)
			before := f.world(t)
			var j journal
			st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			pod := f.w.dump(podPath)
			for _, want := range tc.pod {
				if !strings.Contains(pod, want) {
					t.Errorf("pod lacks %q:\n%s", want, pod)
				}
			}
			for _, not := range []string{"table 100", "table 1001"} {
				if strings.Contains(pod, not) {
					t.Errorf("the host's %s went into the pod:\n%s", not, pod)
				}
			}
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("after Detach the world differs (-before +after):\n%s", diff)
			}
		})
	}
}

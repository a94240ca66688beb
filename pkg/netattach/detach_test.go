package netattach

import (
	"errors"
	"fmt"
	"net"
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

// TestDetachFindsTamperedNetdev lets the pod (which may hold NET_ADMIN in its namespace)
// rename the moved netdev, change its MAC and give its temporary name to a link of its
// own, and stack devices on it, with the pod's namespace alive or dead at Detach: Detach
// must find the netdev by what the pod cannot change, leave nothing stacked on it in
// the pod and give it back with its own name and MAC, also when any one of its
// operations fails first.
func TestDetachFindsTamperedNetdev(t *testing.T) {
	spec := Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true, IBDevice: ibdev}
	for _, tc := range []struct {
		name            string
		newName, newMAC string
		squat           bool // a link of the pod's takes the attachment's temporary name
		stack           bool // the pod stacks a macvlan and a VLAN on it
		kill            bool // the pod's namespace dies before Detach
	}{
		{name: "renamed and re-addressed", newName: "evil0", newMAC: "02:66:00:00:00:01"},
		{name: "temporary name taken by the pod", newName: "evil0", newMAC: "02:66:00:00:00:01", squat: true},
		{name: "devices stacked on it by the pod", newName: "evil0", newMAC: "02:66:00:00:00:01", stack: true},
		{name: "renamed and re-addressed, namespace gone", newName: "evil0", newMAC: "02:66:00:00:00:01", kill: true},
		{name: "given the primary's name and MAC, namespace gone", newName: "eth0", newMAC: "52:54:00:00:00:01", kill: true},
	} {
		// setup attaches and tampers; done detaches and checks the world.
		setup := func(t *testing.T) (*fixture, State, *journal, string) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			before := f.world(t)
			if tc.kill {
				before = strings.Replace(before, "pod:\n", "pod:\n<gone>", 1)
			}
			j := &journal{}
			st, err := f.a.Attach(ctx, spec, f.target, j.save)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			podNS := f.w.paths[podPath]
			l := f.w.byName(podNS, spec.PodIfName)
			mac, err := net.ParseMAC(tc.newMAC)
			if err != nil {
				t.Fatal(err)
			}
			l.attrs.Name, l.attrs.HardwareAddr = tc.newName, mac
			if tc.squat {
				f.w.addLink(podNS, "veth", st.TempName, "02:66:00:00:00:02", 1500, true, "")
			}
			if tc.stack {
				// On a lower that went back to the host, these would still receive its
				// traffic in the pod.
				f.w.addChild(podNS, "macvlan", "spy0", "02:66:00:00:00:03", tc.newName)
				f.w.addChild(podNS, "vlan", "spy1", tc.newMAC, tc.newName)
			}
			if tc.kill {
				f.w.killNS(podPath)
			}
			return f, st, j, before
		}
		done := func(t *testing.T, f *fixture, before string) {
			t.Helper()
			if tc.squat {
				if l := f.w.byName(f.w.paths[podPath], tempNameOf(t, f)); l != nil && l.kind == "veth" {
					f.w.delete(l) // the pod's own link, which Detach must leave alone
				}
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("after Detach the world differs (-before +after):\n%s", diff)
			}
		}
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f, st, j, before := setup(t)
			start := f.w.opCount
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("Detach: %v", err)
			}
			done(t, f, before)
			ops := f.w.opCount - start
			for k := 1; k <= ops; k++ {
				t.Run(fmt.Sprintf("operation %d fails", k), func(t *testing.T) {
					f, st, j, before := setup(t)
					f.w.failAt = f.w.opCount + k
					if err := f.a.Detach(ctx, st, j.save); err == nil {
						t.Fatalf("Detach succeeded although operation %d failed", k)
					}
					f.w.failAt = 0
					last, _ := j.last()
					if err := f.a.Detach(ctx, last, j.save); err != nil {
						t.Fatalf("Detach from the saved state: %v", err)
					}
					done(t, f, before)
				})
			}
		})
	}
}

// tempNameOf is the temporary name of the fixture's one attachment.
func tempNameOf(t *testing.T, f *fixture) string {
	t.Helper()
	return tempName("rdt", State{Spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1"}, Target: f.target}, 0)
}

package netattach

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
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

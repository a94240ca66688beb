package health

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPollPortTransitions(t *testing.T) {
	tests := []struct {
		name string
		// change mutates mlx5_0 port 1, ACTIVE (LinkUp) in the profile.
		change      func(n *testNode)
		want        PortState
		wantChanges []string
	}{
		{
			name:        "nothing changed",
			change:      func(*testNode) {},
			want:        PortState{State: "ACTIVE", PhysState: "LinkUp"},
			wantChanges: nil,
		},
		{
			name:        "ACTIVE to DOWN",
			change:      func(n *testNode) { n.setState("mlx5_0", 1, "1: DOWN", "3: Disabled") },
			want:        PortState{State: "DOWN", PhysState: "Disabled"},
			wantChanges: []string{"mlx5_0 port 1: ACTIVE (LinkUp) -> DOWN (Disabled)"},
		},
		{
			name:        "ACTIVE to INIT, the subnet manager has not configured the port",
			change:      func(n *testNode) { n.write("mlx5_0", 1, "state", "2: INIT") },
			want:        PortState{State: "INIT", PhysState: "LinkUp"},
			wantChanges: []string{"mlx5_0 port 1: ACTIVE (LinkUp) -> INIT (LinkUp)"},
		},
		{
			name:        "phys_state alone",
			change:      func(n *testNode) { n.write("mlx5_0", 1, "phys_state", "6: LinkErrorRecovery") },
			want:        PortState{State: "ACTIVE", PhysState: "LinkErrorRecovery"},
			wantChanges: []string{"mlx5_0 port 1: ACTIVE (LinkUp) -> ACTIVE (LinkErrorRecovery)"},
		},
		{
			name:        "garbage reads as unknown, as discovery reads it",
			change:      func(n *testNode) { n.write("mlx5_0", 1, "state", "4: DOWN") },
			want:        PortState{PhysState: "LinkUp"},
			wantChanges: []string{"mlx5_0 port 1: ACTIVE (LinkUp) -> Unknown (LinkUp)"},
		},
		{
			name: "state file gone",
			change: func(n *testNode) {
				if err := os.Remove(n.portFile("mlx5_0", 1, "state")); err != nil {
					t.Fatal(err)
				}
			},
			want:        PortState{PhysState: "LinkUp"},
			wantChanges: []string{"mlx5_0 port 1: ACTIVE (LinkUp) -> Unknown (LinkUp)"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := newTestNode(t, "disabled-port")
			p := NewPoller(n.root)
			p.Track(n.discover())
			tc.change(n)
			res, err := p.Poll()
			if err != nil {
				t.Fatal(err)
			}
			id := PortID{"mlx5_0", 1}
			if got := res.States[id]; got != tc.want {
				t.Errorf("state %+v, want %+v", got, tc.want)
			}
			if diff := cmp.Diff(tc.wantChanges, res.Changes); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
			// The profile's DOWN port is read as the scan found it.
			if got, want := res.States[PortID{"mlx5_2", 1}], (PortState{"DOWN", "Disabled"}); got != want {
				t.Errorf("mlx5_2 state %+v, want %+v", got, want)
			}
			// Once the publisher scanned again, the node matches and polls are quiet.
			p.Track(n.discover())
			res, err = p.Poll()
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Changes) != 0 || res.States[id] != tc.want {
				t.Errorf("after a rescan: changes %q, state %+v", res.Changes, res.States[id])
			}
		})
	}
}

// TestPollIsLevelTriggered: a change is reported on every poll until a scan takes it in,
// so a held-back republish is never forgotten, and a change undone before the scan is
// not reported at all.
func TestPollIsLevelTriggered(t *testing.T) {
	n := newTestNode(t, "disabled-port")
	p := NewPoller(n.root)
	p.Track(n.discover())
	n.setState("mlx5_1", 1, "1: DOWN", "2: Polling")
	for i := range 3 {
		res, err := p.Poll()
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Changes) != 1 {
			t.Fatalf("poll %d: changes %q", i, res.Changes)
		}
	}
	n.setState("mlx5_1", 1, "4: ACTIVE", "5: LinkUp")
	if res, _ := p.Poll(); len(res.Changes) != 0 {
		t.Errorf("flip undone before a scan still reported: %q", res.Changes)
	}
}

func TestPollDevicesAppearAndDisappear(t *testing.T) {
	n := newTestNode(t, "disabled-port")
	p := NewPoller(n.root)
	p.Track(n.discover())

	plug := n.unplug("mlx5_3")
	res, err := p.Poll()
	if err != nil {
		t.Fatal(err)
	}
	// The port's files are read by their canonical path, which the mock leaves behind.
	if diff := cmp.Diff([]string{"RDMA device mlx5_3 disappeared"}, res.Changes); diff != "" {
		t.Errorf("unplugged (-want +got):\n%s", diff)
	}
	p.Track(n.discover())
	if res, _ := p.Poll(); len(res.Changes) != 0 || len(res.States) != 3 {
		t.Errorf("after the rescan: changes %q, %d ports", res.Changes, len(res.States))
	}

	plug()
	res, _ = p.Poll()
	if diff := cmp.Diff([]string{"RDMA device mlx5_3 appeared"}, res.Changes); diff != "" {
		t.Errorf("plugged back (-want +got):\n%s", diff)
	}
	p.Track(n.discover())
	if res, _ := p.Poll(); len(res.Changes) != 0 || len(res.States) != 4 {
		t.Errorf("after the rescan: changes %q, %d ports", res.Changes, len(res.States))
	}

	// A device being registered shows up before its ports: it is new once they exist,
	// and not on every poll before that.
	rxe := filepath.Join(n.root, "class/infiniband/rxe0")
	if err := os.MkdirAll(rxe, 0o755); err != nil {
		t.Fatal(err)
	}
	res, _ = p.Poll()
	if !slices.Equal(res.Changes, []string{"RDMA device rxe0 appeared"}) {
		t.Errorf("new device: %q", res.Changes)
	}
	p.Track(n.discover()) // no ports, no inventory change
	if res, _ := p.Poll(); len(res.Changes) != 0 {
		t.Errorf("device without ports reported again: %q", res.Changes)
	}
	if err := os.MkdirAll(filepath.Join(rxe, "ports/1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if res, _ := p.Poll(); !slices.Equal(res.Changes, []string{"RDMA device rxe0 appeared"}) {
		t.Errorf("ports appeared: %q", res.Changes)
	}
}

func TestPollWithoutDevices(t *testing.T) {
	root := t.TempDir()
	p := NewPoller(root)
	res, err := p.Poll()
	if err != nil || len(res.Changes) != 0 || len(res.States) != 0 {
		t.Errorf("empty root: %+v, %v", res, err)
	}
	// A class directory that cannot be listed fails the poll: health is not vouched for.
	if err := os.MkdirAll(filepath.Join(root, "class"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "class/infiniband"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Poll(); err == nil {
		t.Error("unlistable device directory accepted")
	}
}

// BenchmarkPoll measures one poll: dgx-h100 has 10 ports, large 64 ports and 256 VFs.
func BenchmarkPoll(b *testing.B) {
	for _, profile := range []string{"dgx-h100", "large"} {
		b.Run(profile, func(b *testing.B) {
			n := newTestNode(b, profile)
			p := NewPoller(n.root)
			p.Track(n.discover())
			for b.Loop() {
				res, err := p.Poll()
				if err != nil || len(res.Changes) != 0 {
					b.Fatal(res.Changes, err)
				}
			}
		})
	}
}

package netattach

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

// countSteps runs one clean Attach and Detach of spec and returns how many journal
// saves and mutating netlink operations each took.
func countSteps(t *testing.T, spec Spec) (saves, attachOps, detachOps int) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	var j journal
	st, err := f.a.Attach(ctx, spec, f.target, j.save)
	if err != nil {
		t.Fatal(err)
	}
	saves, attachOps = len(j.saved), f.w.opCount
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatal(err)
	}
	return saves, attachOps, f.w.opCount - attachOps
}

// converge detaches from the State the journal holds (if any) and checks that the
// world is back to before.
func converge(t *testing.T, f *fixture, j *journal, before string) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if st, ok := j.last(); ok {
		var j2 journal
		if err := f.a.Detach(ctx, st, j2.save); err != nil {
			t.Fatalf("Detach from the saved state (phase %s): %v", st.Phase, err)
		}
	}
	if diff := cmp.Diff(before, f.world(t)); diff != "" {
		t.Fatalf("the world did not converge (-before +after):\n%s", diff)
	}
}

// TestAttachCrashPoints stops Attach at every point where it saves its State or changes
// the system, as a crash would (no undo), and checks that Detach from the last saved
// State restores the world; and that Attach's own undo does the same.
func TestAttachCrashPoints(t *testing.T) {
	for _, tc := range attachCases() {
		t.Run(tc.name, func(t *testing.T) {
			saves, ops, _ := countSteps(t, tc.spec)
			if saves < 3 {
				t.Fatalf("only %d saves in a clean attach", saves)
			}
			for _, undo := range []bool{false, true} {
				for k := 1; k <= saves; k++ {
					t.Run(fmt.Sprintf("undo=%v/journal fails at save %d", undo, k), func(t *testing.T) {
						_, ctx := ktesting.NewTestContext(t)
						f := newFixture(t)
						f.a.noUndo = !undo
						before := f.world(t)
						j := journal{failAt: k}
						st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
						if !errors.Is(err, errJournal) {
							t.Fatalf("Attach = %v, want the journal error", err)
						}
						if undo {
							if st.Phase != "" {
								t.Fatalf("undo left phase %q: %v", st.Phase, err)
							}
							j.saved = nil // the caller forgets a fully undone attachment
						}
						converge(t, f, &j, before)
					})
				}
				for k := 1; k <= ops; k++ {
					t.Run(fmt.Sprintf("undo=%v/operation %d fails", undo, k), func(t *testing.T) {
						_, ctx := ktesting.NewTestContext(t)
						f := newFixture(t)
						f.a.noUndo = !undo
						before := f.world(t)
						f.w.failAt = k
						var j journal
						st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
						if err == nil || !strings.Contains(err.Error(), "injected failure") {
							t.Fatalf("Attach = %v, want the injected failure of %v", err, f.w.ops[k-1])
						}
						f.w.failAt = 0
						if undo && st.Phase == "" {
							j.saved = nil
						}
						converge(t, f, &j, before)
					})
				}
			}
		})
	}
}

// TestDetachCrashPoints fails every operation of Detach once and checks that a second
// Detach from the saved State converges.
func TestDetachCrashPoints(t *testing.T) {
	for _, tc := range attachCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, _, ops := countSteps(t, tc.spec)
			for k := 1; k <= ops; k++ {
				t.Run(fmt.Sprintf("operation %d fails", k), func(t *testing.T) {
					_, ctx := ktesting.NewTestContext(t)
					f := newFixture(t)
					before := f.world(t)
					var j journal
					st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
					if err != nil {
						t.Fatal(err)
					}
					f.w.failAt = f.w.opCount + k
					if err := f.a.Detach(ctx, st, j.save); err == nil {
						t.Fatalf("Detach succeeded although operation %d failed", k)
					}
					f.w.failAt = 0
					converge(t, f, &j, before)
				})
			}
		})
	}
}

// TestPodNamespaceGone detaches after the pod's namespace died: children died with
// it, a moved netdev came back to the host (maybe renamed, maybe late), an RDMA device
// came back by itself.
func TestPodNamespaceGone(t *testing.T) {
	move := Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true, IBDevice: ibdev}
	exclusive := move
	exclusive.RDMADevice = ibdev
	for _, tc := range []struct {
		name  string
		spec  Spec
		setup func(f *fixture)
		// returned is where the kernel puts a moved netdev ("" for children).
		returned string
		// late returns the netdev only while Detach waits for it (half its timeout on the
		// attacher's clock), never makes it miss the timeout: Detach must fail and succeed
		// once it is back.
		late, never bool
	}{
		{name: "macvlan", spec: attachCases()[0].spec},
		{name: "ipvlan", spec: attachCases()[1].spec},
		{name: "ipoib", spec: attachCases()[4].spec},
		{name: "move, name free in the host", spec: move, returned: "net1"},
		{name: "move, name taken in the host", spec: move, returned: "dev",
			setup: func(f *fixture) { f.w.addLink(rootFD, "device", "net1", "02:00:00:00:00:0b", 1500, false, "") }},
		{name: "move, returned late", spec: move, returned: "net1", late: true},
		{name: "move, not returned in time", spec: move, returned: "net1", never: true},
		{name: "move in exclusive mode", spec: exclusive, returned: "net1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := strings.Replace(f.world(t), "pod:\n", "pod:\n<gone>", 1)
			var j journal
			st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
			if err != nil {
				t.Fatal(err)
			}
			clk := testclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			f.a.clock = clk
			f.w.deferReturn = tc.late || tc.never
			f.w.killNS(podPath)
			host := f.w.dump("/host")
			if tc.returned != "" && !f.w.deferReturn && !strings.Contains(host, "\n"+tc.returned) {
				t.Fatalf("the moved netdev did not come back as %s*:\n%s", tc.returned, host)
			}
			if strings.Contains(host, "macvlan") || strings.Contains(host, "ipvlan") || strings.Contains(host, "pkey=0x8001") {
				t.Fatalf("a child survived its namespace:\n%s", host)
			}
			if !f.w.deferReturn {
				err = f.a.Detach(ctx, st, j.save)
			} else {
				detached := make(chan error, 1)
				go func() { detached <- f.a.Detach(ctx, st, j.save) }()
				// Detach waits on the clock: the netdev is neither in the pod nor back.
				testwait.For(t, "Detach waiting for the netdev", clk.HasWaiters)
				if tc.late {
					f.w.finishReturn()
					clk.Step(f.a.returnTimeout / 2)
				} else {
					clk.Step(f.a.returnTimeout)
				}
				err = testwait.Receive(t, "Detach to return", detached)
			}
			if tc.never {
				if err == nil || !strings.Contains(err.Error(), "neither in the pod nor back in the host") {
					t.Fatalf("Detach before the netdev returned = %v, want an error", err)
				}
				f.w.finishReturn()
				err = f.a.Detach(ctx, st, j.save)
			}
			if err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("after Detach the world differs (-before +after):\n%s", diff)
			}
		})
	}
}

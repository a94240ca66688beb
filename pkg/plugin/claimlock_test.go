package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

// TestClaimLocks checks the claim locks within one process and across two (two
// claimLocks on one directory stand for two plugin instances: flock(2) locks belong to
// open file descriptions, so they exclude each other just like two processes).
func TestClaimLocks(t *testing.T) {
	const a, b = "11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222"
	ctx := context.Background()
	tests := []struct {
		name      string
		otherProc bool
	}{{"same process", false}, {"other process", true}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			mine, err := newClaimLocks(dir)
			if err != nil {
				t.Fatal(err)
			}
			other := mine
			if tc.otherProc {
				if other, err = newClaimLocks(dir); err != nil {
					t.Fatal(err)
				}
			}
			held, err := mine.lock(ctx, []string{b, a, b})
			if err != nil {
				t.Fatal(err)
			}
			if h := other.tryLock(ctx, a); h != nil {
				t.Fatal("claim locked twice")
			}
			if h := other.tryLock(ctx, "33333333-3333-4333-8333-333333333333"); h == nil {
				t.Fatal("an unrelated claim is locked too")
			} else {
				h.release(nil)
			}
			// waiting starts a lock of a on other and waits until it waits: for the
			// in-process lock, or (another process) for the next poll of a's file.
			waiting := func(ctx context.Context) <-chan *heldClaims {
				clk := testclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
				other.clock = clk
				got := make(chan *heldClaims, 1)
				go func() {
					h, err := other.lock(ctx, []string{a})
					if err != nil && ctx.Err() == nil {
						t.Error(err)
					}
					got <- h
				}()
				testwait.For(t, "a lock waiting for a held claim", func() bool {
					if tc.otherProc {
						return clk.HasWaiters()
					}
					other.mu.Lock()
					defer other.mu.Unlock()
					return other.held[a] != nil && other.held[a].users == 2
				})
				return got
			}
			wctx, cancel := context.WithCancel(ctx)
			got := waiting(wctx)
			cancel()
			if h := testwait.Receive(t, "the lock to return", got); h != nil {
				t.Fatal("waiting for a held claim did not end with its context")
			}
			// A waiter blocked on a's file while the holder removes it must end up
			// holding the lock under the file's name, not the removed file.
			got = waiting(ctx)
			held.release(map[string]bool{a: true})
			if clk, ok := other.clock.(*testclock.FakeClock); ok && tc.otherProc {
				clk.Step(claimLockPoll)
			}
			waiter := testwait.Receive(t, "the lock to return", got)
			if waiter == nil {
				t.Fatal("the waiter did not get the lock")
			}
			if _, err := os.Stat(filepath.Join(dir, a+".lock")); err != nil {
				t.Fatalf("the waiter holds a lock on a removed file: %v", err)
			}
			if h := mine.tryLock(ctx, a); h != nil {
				t.Fatal("claim locked twice after a removal")
			}
			waiter.release(nil)
			if n := mine.sweep(ctx); n != 3 {
				t.Errorf("sweep removed %d lock files, want 3", n)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 {
				t.Errorf("lock files left after sweep: %v", entries)
			}
			if len(mine.held) != 0 || len(other.held) != 0 {
				t.Errorf("in-process locks left: %v %v", mine.held, other.held)
			}
		})
	}
}

package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
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
			timeout, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
			defer cancel()
			if _, err := other.lock(timeout, []string{a}); err == nil {
				t.Fatal("waiting for a held claim did not end with its context")
			}
			// A waiter blocked on a's file while the holder removes it must end up
			// holding the lock under the file's name, not the removed file.
			got := make(chan *heldClaims)
			go func() {
				h, err := other.lock(ctx, []string{a})
				if err != nil {
					t.Error(err)
				}
				got <- h
			}()
			time.Sleep(10 * time.Millisecond)
			held.release(map[string]bool{a: true})
			waiter := <-got
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

package checkpoint

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

// TestUpdateGroupsConcurrentChanges holds one commit while others queue, and checks that
// the queued changes are saved together in one batch, each visible to the next, and all
// on disk when their Update returns.
func TestUpdateGroupsConcurrentChanges(t *testing.T) {
	for _, waiting := range []int{1, 7, 32} {
		t.Run(fmt.Sprintf("%d waiting", waiting), func(t *testing.T) {
			s, _ := newTestStore(t, "boot-a")
			var batches int
			s.SetHooks(Hooks{Committed: func(*Checkpoint) { batches++ }})
			release := make(chan struct{})
			firstDone := make(chan error)
			go func() {
				firstDone <- s.Update(func(cp *Checkpoint) (bool, error) {
					<-release
					cp.Claims[testUID("first")] = sampleClaim(testUID("first"), PhasePrepareStarted)
					return true, nil
				})
			}()
			// Wait until the first change is being committed.
			waitFor(t, func() bool { s.queueMu.Lock(); defer s.queueMu.Unlock(); return s.committing && len(s.queue) == 0 })
			var wg sync.WaitGroup
			errs := make([]error, waiting)
			for i := range waiting {
				wg.Add(1)
				go func() {
					defer wg.Done()
					uid := testUID(fmt.Sprintf("u%d", i))
					errs[i] = s.Update(func(cp *Checkpoint) (bool, error) {
						cp.Claims[uid] = sampleClaim(uid, PhasePrepareCompleted)
						return true, nil
					})
					if errs[i] == nil {
						// Durable (as far as this store promises) when Update returns.
						unlock, err := s.Lock()
						if err != nil {
							errs[i] = err
							return
						}
						loaded, err := s.Load()
						unlock()
						if err != nil || loaded.Checkpoint.Claims[uid] == nil {
							errs[i] = fmt.Errorf("claim %s not on disk after Update returned: %v", uid, err)
						}
					}
				}()
			}
			waitFor(t, func() bool { s.queueMu.Lock(); defer s.queueMu.Unlock(); return len(s.queue) == waiting })
			close(release)
			if err := <-firstDone; err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
			if batches != 2 {
				t.Errorf("%d batches for 1 + %d queued changes, want 2", batches, waiting)
			}
			got, err := load(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if n := len(got.Checkpoint.Claims); n != waiting+1 {
				t.Errorf("%d claims saved, want %d", n, waiting+1)
			}
		})
	}
}

// TestUpdateErrorsStayPerChange: a change that fails leaves the others of its batch alone.
func TestUpdateErrorsStayPerChange(t *testing.T) {
	s, _ := newTestStore(t, "boot-a")
	boom := errors.New("boom")
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Update(func(cp *Checkpoint) (bool, error) {
				if i%2 == 1 {
					return false, boom
				}
				uid := testUID(fmt.Sprintf("u%d", i))
				cp.Claims[uid] = sampleClaim(uid, PhasePrepareStarted)
				return true, nil
			})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if want := map[bool]error{true: boom, false: nil}[i%2 == 1]; !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("change %d: error %v, want %v", i, err, want)
		}
	}
	got, err := load(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Checkpoint.Claims); n != 4 {
		t.Errorf("%d claims saved, want 4", n)
	}
}

// TestUpdateSeesOtherWriters: the cache of the last save is not used once the file was
// written by someone else (another plugin instance).
func TestUpdateSeesOtherWriters(t *testing.T) {
	s, dir := newTestStore(t, "boot-a")
	add := func(s *Store, uid string) {
		t.Helper()
		if err := s.Update(func(cp *Checkpoint) (bool, error) {
			cp.Claims[uid] = sampleClaim(uid, PhasePrepareStarted)
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	add(s, testUID("mine"))
	other := NewStore(dir, s.bootIDPath)
	add(other, testUID("theirs"))
	add(s, testUID("mine-again"))
	got, err := load(t, s)
	if err != nil {
		t.Fatal(err)
	}
	for _, uid := range []string{testUID("mine"), testUID("theirs"), testUID("mine-again")} {
		if got.Checkpoint.Claims[uid] == nil {
			t.Errorf("claim %s lost", uid)
		}
	}
}

// TestTornFileAfterRebootIsQuarantined: without fsync, a kernel crash or power loss may
// leave the checkpoint empty, cut short or zero-filled. That always comes with a reboot;
// the file must then be moved aside like any corrupted file and the store start empty.
func TestTornFileAfterRebootIsQuarantined(t *testing.T) {
	tests := map[string]func(valid []byte) []byte{
		"empty":       func([]byte) []byte { return nil },
		"cut short":   func(valid []byte) []byte { return valid[:len(valid)/2] },
		"zero-filled": func(valid []byte) []byte { return make([]byte, len(valid)) },
		"first block": func(valid []byte) []byte { return valid[:min(len(valid), 16)] },
	}
	for name, tear := range tests {
		t.Run(name, func(t *testing.T) {
			s, dir := newTestStore(t, "boot-a")
			if err := s.Update(func(cp *Checkpoint) (bool, error) {
				cp.Claims[testUID("u1")] = sampleClaim(testUID("u1"), PhasePrepareCompleted)
				return true, nil
			}); err != nil {
				t.Fatal(err)
			}
			valid, err := os.ReadFile(s.Path())
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(s.Path(), tear(valid), 0o600); err != nil {
				t.Fatal(err)
			}
			// The reboot: a new process with a new boot ID.
			if err := os.WriteFile(s.bootIDPath, []byte("boot-b\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			after := NewStore(dir, s.bootIDPath)
			var recovered Loaded
			after.SetHooks(Hooks{Recover: func(l Loaded) error { recovered = l; return nil }})
			if err := after.Update(func(*Checkpoint) (bool, error) { return false, nil }); err != nil {
				t.Fatalf("update after a torn file: %v", err)
			}
			if recovered.QuarantinedTo == "" || !errors.Is(recovered.Corruption, ErrCorrupt) {
				t.Fatalf("torn file not quarantined: %+v", recovered)
			}
			got, err := load(t, after)
			if err != nil {
				t.Fatal(err)
			}
			if len(got.Checkpoint.Claims) != 0 || got.Checkpoint.BootID != "boot-b" {
				t.Errorf("after quarantine: %+v, want an empty checkpoint of boot-b", got.Checkpoint)
			}
		})
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, "condition", cond)
}

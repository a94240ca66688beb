package portcounters

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// countingRead returns a read that counts its calls and returns a reading whose Errors
// is the call number; when gate is not nil each call waits for a value from it.
func countingRead(calls *atomic.Int32, gate chan struct{}) func() Reading {
	return func() Reading {
		n := calls.Add(1)
		if gate != nil {
			<-gate
		}
		return Reading{Errors: int(n)}
	}
}

// waitForTimer waits until a Get has started waiting on the fake clock.
func waitForTimer(c *testingclock.FakeClock) {
	for !c.HasWaiters() {
		runtime.Gosched()
	}
}

func TestCacheReusesAReadingForMaxAge(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	var calls atomic.Int32
	var done []Reading
	c := NewCache(countingRead(&calls, nil), CacheOptions{MaxAge: 5 * time.Second, Clock: clk, Done: func(r Reading) { done = append(done, r) }})

	steps := []struct {
		advance   time.Duration
		wantCalls int32
	}{
		{0, 1},               // the first Get reads
		{4 * time.Second, 1}, // 4s old: served again
		{time.Second, 2},     // 5s old: read again
		{0, 2},
	}
	for i, s := range steps {
		clk.Step(s.advance)
		r, stale := c.Get()
		if stale || calls.Load() != s.wantCalls || r.Errors != int(s.wantCalls) {
			t.Errorf("step %d: reading %d, stale %v, %d reads; want reading %d, fresh, %d reads", i, r.Errors, stale, calls.Load(), s.wantCalls, s.wantCalls)
		}
	}
	if len(done) != 2 {
		t.Errorf("Done told of %d reads, want 2", len(done))
	}
}

// TestCacheSharesARead: callers that arrive while a read runs wait for that read.
func TestCacheSharesARead(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	var calls atomic.Int32
	gate := make(chan struct{})
	c := NewCache(countingRead(&calls, gate), CacheOptions{Clock: clk})

	const callers = 8
	var wg sync.WaitGroup
	results := make([]Reading, callers)
	for i := range callers {
		wg.Go(func() { results[i], _ = c.Get() })
	}
	// Every caller waits for the one read before it is let go.
	for !clk.HasWaiters() || calls.Load() == 0 {
		runtime.Gosched()
	}
	close(gate)
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Errorf("%d reads for %d concurrent callers, want 1", n, callers)
	}
	for i, r := range results {
		if r.Errors != 1 {
			t.Errorf("caller %d got reading %d, want the shared one", i, r.Errors)
		}
	}
}

// TestCacheDoesNotWaitForASlowRead: a read that takes longer than Wait leaves the caller
// with the last reading, stale; the read finishes in the background and serves the next.
func TestCacheDoesNotWaitForASlowRead(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	var calls atomic.Int32
	gate := make(chan struct{}, 2)
	c := NewCache(countingRead(&calls, gate), CacheOptions{MaxAge: 5 * time.Second, Wait: 2 * time.Second, Clock: clk})

	gate <- struct{}{} // the first read is quick
	if r, stale := c.Get(); r.Errors != 1 || stale {
		t.Fatalf("first Get: reading %d, stale %v", r.Errors, stale)
	}
	clk.Step(6 * time.Second)

	got := make(chan Reading)
	var gotStale atomic.Bool
	go func() {
		r, stale := c.Get()
		gotStale.Store(stale)
		got <- r
	}()
	waitForTimer(clk)
	clk.Step(2 * time.Second) // the read hangs past Wait
	if r := <-got; r.Errors != 1 || !gotStale.Load() {
		t.Errorf("Get during a slow read: reading %d, stale %v; want the last one (1), stale", r.Errors, gotStale.Load())
	}

	// A caller that comes while the read still hangs shares it rather than reading again.
	go func() {
		r, _ := c.Get()
		got <- r
	}()
	waitForTimer(clk)
	gate <- struct{}{}
	if r := <-got; r.Errors != 2 {
		t.Errorf("Get when the slow read finished: reading %d, want 2", r.Errors)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d reads, want 2: one hung read is shared, not repeated", n)
	}
	if r, stale := c.Get(); r.Errors != 2 || stale {
		t.Errorf("Get after the slow read: reading %d, stale %v; want it fresh from the cache", r.Errors, stale)
	}
}

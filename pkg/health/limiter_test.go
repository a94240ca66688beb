package health

import (
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"
)

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

func TestLimiter(t *testing.T) {
	tests := []struct {
		name      string
		max       int
		wantBurst int
		// wantRefill is the delay after the burst.
		wantRefill time.Duration
	}{
		{name: "default", max: DefaultMaxRepublishPerMinute, wantBurst: 10, wantRefill: 6 * time.Second},
		{name: "two", max: 2, wantBurst: 1, wantRefill: time.Minute},
		{name: "odd", max: 7, wantBurst: 4, wantRefill: 20 * time.Second},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := testclock.NewFakePassiveClock(epoch)
			l, err := NewLimiter(c, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			for i := range tc.wantBurst {
				if d := l.Delay(); d != 0 {
					t.Fatalf("publish %d of the burst delayed by %s", i, d)
				}
				l.Take()
			}
			if d := l.Delay(); d != tc.wantRefill {
				t.Errorf("delay after the burst %s, want %s", d, tc.wantRefill)
			}
			c.SetTime(c.Now().Add(tc.wantRefill / 2))
			if d := l.Delay(); d != tc.wantRefill/2 {
				t.Errorf("delay half-way %s, want %s", d, tc.wantRefill/2)
			}
			c.SetTime(c.Now().Add(tc.wantRefill / 2))
			if d := l.Delay(); d != 0 {
				t.Errorf("delay after a refill %s", d)
			}
			// A quiet minute fills the bucket up to the burst, not beyond.
			c.SetTime(c.Now().Add(time.Hour))
			n := 0
			for l.Delay() == 0 {
				l.Take()
				n++
			}
			if n != tc.wantBurst {
				t.Errorf("burst after an hour %d, want %d", n, tc.wantBurst)
			}
		})
	}
}

// TestLimiterBound: whatever the demand, no minute sees more than max publishes.
func TestLimiterBound(t *testing.T) {
	c := testclock.NewFakePassiveClock(epoch)
	l, err := NewLimiter(c, 20)
	if err != nil {
		t.Fatal(err)
	}
	var times []time.Time
	// Publish as soon as allowed, for ten minutes.
	for c.Now().Before(epoch.Add(10 * time.Minute)) {
		if d := l.Delay(); d > 0 {
			c.SetTime(c.Now().Add(d))
			continue
		}
		l.Take()
		times = append(times, c.Now())
	}
	for i, start := range times {
		n := 0
		for _, at := range times[i:] {
			if at.Sub(start) < time.Minute {
				n++
			}
		}
		if n > 20 {
			t.Fatalf("%d publishes in the minute from %s", n, start)
		}
	}
	// Ten minutes: the burst at once, then one every six seconds, at 6s to 594s.
	if want := 10 + 99; len(times) != want {
		t.Errorf("%d publishes in ten minutes, want %d", len(times), want)
	}
}

func TestLimiterOptions(t *testing.T) {
	c := testclock.NewFakePassiveClock(epoch)
	for _, max := range []int{-1, 1} {
		if _, err := NewLimiter(c, max); err == nil {
			t.Errorf("max %d accepted", max)
		}
	}
	l, err := NewLimiter(c, 0)
	if err != nil || l != nil {
		t.Fatalf("0: %v, %v, want no limiter", l, err)
	}
	for range 1000 {
		if d := l.Delay(); d != 0 {
			t.Fatalf("nil limiter delayed %s", d)
		}
		l.Take()
	}
}

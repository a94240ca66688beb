package health

import (
	"errors"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// DefaultMaxRepublishPerMinute bounds republishes caused by changes: an outage of an
// InfiniBand port walks through DOWN, INIT, ARMED and ACTIVE in a few seconds, which the
// burst of half of it lets through at once, while a port that flaps every second is
// published every six seconds.
const DefaultMaxRepublishPerMinute = 20

// Limiter damps republishing: at most max republishes in any minute. It is a token bucket
// (golang.org/x/time/rate on the limiter's clock) that holds max/2 (rounded up) tokens and
// refills the rest evenly over a minute, so a burst of changes goes out at once and a
// flapping port settles to a steady rate. The caller asks Delay before publishing and
// calls Take after a publish; a change that must wait is not dropped but published when
// the delay is over, with whatever state the node is in by then, so the last state always
// wins.
//
// A nil *Limiter never delays. It is safe for concurrent use.
type Limiter struct {
	clock  clock.PassiveClock
	bucket *rate.Limiter
	refill time.Duration // one token
}

// ValidateMaxPerMinute checks a --max-republish-per-minute value: 0 turns damping off,
// and a bucket needs at least two (one for the burst, one to refill).
func ValidateMaxPerMinute(max int) error {
	if max < 0 || max == 1 {
		return fmt.Errorf("max republishes per minute must be 0 (no damping) or at least 2, got %d", max)
	}
	return nil
}

// NewLimiter returns a limiter of max republishes a minute, or nil (no damping) for 0.
func NewLimiter(c clock.PassiveClock, max int) (*Limiter, error) {
	if err := ValidateMaxPerMinute(max); err != nil {
		return nil, err
	}
	if max == 0 {
		return nil, nil
	}
	if c == nil {
		return nil, errors.New("limiter needs a clock")
	}
	burst := (max + 1) / 2
	refill := time.Minute / time.Duration(max-burst)
	return &Limiter{clock: c, bucket: rate.NewLimiter(rate.Every(refill), burst), refill: refill}, nil
}

// Delay returns how long to wait before the next publish; zero when one may go now.
func (l *Limiter) Delay() time.Duration {
	if l == nil {
		return 0
	}
	tokens := l.bucket.TokensAt(l.clock.Now())
	// The tolerance keeps float rounding from asking for one more nanosecond.
	if tokens >= 1-1e-9 {
		return 0
	}
	return time.Duration(math.Ceil((1 - tokens) * float64(l.refill)))
}

// Take records a publish. It may go below zero tokens when a publish was forced (the
// model fallback), which delays the following ones accordingly.
func (l *Limiter) Take() {
	if l == nil {
		return
	}
	// A reservation always succeeds for one token (the burst is at least one); taken
	// when none is left, it is the debt that delays the next publishes.
	l.bucket.ReserveN(l.clock.Now(), 1)
}

// Package testwait waits, in tests, for what another goroutine does: one bound and one
// polling loop (k8s.io/apimachinery's wait) for every package's tests, instead of a
// busy-wait helper in each. It is for what must happen; a test does not wait a while to
// see that something does not happen: it steps a fake clock (k8s.io/utils/clock/testing)
// past the moment, or runs in a testing/synctest bubble and looks once every goroutine
// waits (synctest.Wait).
package testwait

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Timeout bounds every wait: far above what any wait takes on a loaded machine, so that
// reaching it means a hang, not slowness.
const Timeout = 10 * time.Second

// interval is the polling period; the conditions are cheap reads of in-memory state or
// of a fake API server.
const interval = time.Millisecond

// For polls cond until it holds and fails t with what if it does not within Timeout.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Poll(cond) {
		t.Fatalf("%s: not within %s", what, Timeout)
	}
}

// Poll polls cond until it holds or Timeout passes, and reports whether it held; for
// tests that report a timeout themselves, with what they saw last.
func Poll(cond func() bool) bool {
	err := wait.PollUntilContextTimeout(context.Background(), interval, Timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return err == nil
}

// Receive returns the next value from c and fails t with what if none comes within
// Timeout.
func Receive[T any](t testing.TB, what string, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(Timeout):
		t.Fatalf("%s: not within %s", what, Timeout)
	}
	var zero T
	return zero
}

package testwait

import (
	"sync/atomic"
	"testing"
)

func TestPoll(t *testing.T) {
	var n atomic.Int32
	if !Poll(func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("Poll gave up on a condition that holds at the third call")
	}
	if got := n.Load(); got != 3 {
		t.Errorf("cond called %d times, want 3 (it must stop once it holds)", got)
	}
}

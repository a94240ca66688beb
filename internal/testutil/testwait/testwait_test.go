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

func TestReceive(t *testing.T) {
	c := make(chan int, 1)
	go func() { c <- 7 }()
	if got := Receive(t, "value", c); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
}

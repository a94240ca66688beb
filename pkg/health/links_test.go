package health

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// fakeLinks is a LinkSource the test drives: each subscription gets a channel the test
// sends to and closes (the kernel ending it); like the real source, a subscription also
// ends with its context. Subscriptions fail while failures is positive.
type fakeLinks struct {
	mu         sync.Mutex
	failures   int
	subscribes int
	// subscribed receives the test's end of every successful subscription.
	subscribed chan chan LinkEvent
}

func newFakeLinks() *fakeLinks { return &fakeLinks{subscribed: make(chan chan LinkEvent, 10)} }

func (f *fakeLinks) Subscribe(ctx context.Context, _ func(error)) (<-chan LinkEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribes++
	if f.failures > 0 {
		f.failures--
		return nil, errors.New("netlink: operation not permitted")
	}
	in, out := make(chan LinkEvent), make(chan LinkEvent)
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-in:
				if !ok {
					return
				}
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	f.subscribed <- in
	return out, nil
}

func TestLinkWatcherRelevance(t *testing.T) {
	inv := &discovery.Inventory{Ports: []discovery.Port{{IBDev: "mlx5_0", Port: 1, Netdev: "ibp24s0"}, {IBDev: "rxe0", Port: 1, Netdev: "veth-rxe"}}}
	eth0 := LinkEvent{Index: 2, Name: "eth0", Type: "device", OperState: "up", Carrier: true, MTU: 1500}
	ib := LinkEvent{Index: 3, Name: "ibp24s0", Type: "ipoib", OperState: "up", Carrier: true, MTU: 4092}
	veth := LinkEvent{Index: 9, Name: "veth12ab", Type: "veth", OperState: "up", Carrier: true, MTU: 1500}
	vethRXE := LinkEvent{Index: 10, Name: "veth-rxe", Type: "veth", OperState: "up", Carrier: true, MTU: 1500}
	with := func(ev LinkEvent, change func(*LinkEvent)) LinkEvent {
		change(&ev)
		return ev
	}
	// Each step is fed in order to one watcher.
	steps := []struct {
		name string
		ev   LinkEvent
		want string
	}{
		{"first sight of a physical netdev", eth0, "netdev eth0 added or changed"},
		{"the same message again", eth0, ""},
		{"carrier lost", with(eth0, func(e *LinkEvent) { e.Carrier, e.OperState = false, "down" }), "netdev eth0 link changed to down"},
		{"carrier back", eth0, "netdev eth0 link changed to up"},
		{"enslaved to a bond", with(eth0, func(e *LinkEvent) { e.MasterIndex = 7 }), "netdev eth0 enslaved or released"},
		{"released", eth0, "netdev eth0 enslaved or released"},
		{"MTU", with(eth0, func(e *LinkEvent) { e.MTU = 9000 }), "netdev eth0 MTU changed"},
		{"renamed", with(eth0, func(e *LinkEvent) { e.Name, e.MTU = "enp3s0f0np0", 9000 }), "netdev eth0 renamed to enp3s0f0np0"},
		{"IPoIB", ib, "netdev ibp24s0 added or changed"},
		{"IPoIB operstate", with(ib, func(e *LinkEvent) { e.OperState = "lowerlayerdown" }), "netdev ibp24s0 link changed to lowerlayerdown"},
		{"pod veth comes", veth, ""},
		{"pod veth goes", with(veth, func(e *LinkEvent) { e.Deleted = true }), ""},
		{"veth a port names", vethRXE, "netdev veth-rxe added or changed"},
		{"bond created", LinkEvent{Index: 7, Name: "bond0", Type: "bond", OperState: "down"}, "netdev bond0 added or changed"},
		{"netdev removed", LinkEvent{Index: 3, Deleted: true, Name: "ibp24s0", Type: "ipoib"}, "netdev ibp24s0 removed"},
	}
	w := NewLinkWatcher(newFakeLinks(), testclock.NewFakeClock(epoch))
	w.Track(inv)
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			got, ok := w.relevant(s.ev)
			if ok != (s.want != "") || got != s.want {
				t.Errorf("relevant = %q, %v; want %q", got, ok, s.want)
			}
		})
	}
}

// TestLinkWatcherResubscribes: a failing subscribe is retried with backoff, an ended
// subscription is restarted, and a restart asks for a rescan (events may be lost).
func TestLinkWatcherResubscribes(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := testclock.NewFakeClock(epoch)
	src := newFakeLinks()
	src.failures = 2
	w := NewLinkWatcher(src, c)
	notes := make(chan string, 10)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.Run(ctx, func(r string) { notes <- r })
	}()

	// Two failures: retried after 1s, then 2s.
	for _, d := range []time.Duration{time.Second, 2 * time.Second} {
		waitForTimer(t, c)
		if w.Active() {
			t.Fatal("active without a subscription")
		}
		c.Step(d)
	}
	ch := <-src.subscribed
	waitFor(t, w.Active)
	ch <- LinkEvent{Index: 5, Name: "eth1", Type: "device", OperState: "up", Carrier: true}
	if got := <-notes; got != "netdev eth1 added or changed" {
		t.Errorf("note %q", got)
	}

	// The kernel ends the subscription (ENOBUFS): resubscribed after 1s, with a rescan.
	close(ch)
	waitForTimer(t, c)
	c.Step(time.Second)
	ch = <-src.subscribed
	if got := <-notes; got != "rtnetlink subscription restarted" {
		t.Errorf("note %q", got)
	}
	// What was known about links is forgotten: the same message counts again.
	ch <- LinkEvent{Index: 5, Name: "eth1", Type: "device", OperState: "up", Carrier: true}
	if got := <-notes; got != "netdev eth1 added or changed" {
		t.Errorf("note %q", got)
	}
	cancel()
	<-done
	if w.Active() {
		t.Error("active after the end")
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.subscribes != 4 {
		t.Errorf("%d subscribes, want 4", src.subscribes)
	}
}

// waitForTimer waits until a goroutine waits on the fake clock.
func waitForTimer(t *testing.T, c *testclock.FakeClock) {
	t.Helper()
	waitFor(t, c.HasWaiters)
}

// waitFor polls cond for up to testwait.Timeout.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.For(t, "condition", cond)
}

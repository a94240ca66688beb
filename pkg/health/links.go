package health

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Resubscription backoff: a failing subscription is retried quickly at first, then every
// minute; meanwhile polling and the full rescan keep every guarantee.
const (
	minResubscribe = time.Second
	maxResubscribe = time.Minute
)

// interestingTypes are the link kinds that can become or stop being a port's netdev:
// physical functions, IPoIB interfaces and bonds. veths, bridges and tunnels come and go
// with pods and are ignored unless a port names them.
var interestingTypes = map[string]bool{"device": true, "ipoib": true, "bond": true}

// LinkWatcher turns rtnetlink link events into rescan requests: a netdev that was
// added, removed, enslaved or released, or whose carrier, operstate or MTU changed. It
// keeps the last event per link so that messages that change none of that are ignored.
type LinkWatcher struct {
	source LinkSource
	clock  clock.WithTicker

	// active is true while a subscription runs; the monitor reports it.
	active atomic.Bool

	mu      sync.Mutex
	netdevs map[string]bool
	links   map[int]LinkEvent
}

// NewLinkWatcher returns a watcher of source.
func NewLinkWatcher(source LinkSource, c clock.WithTicker) *LinkWatcher {
	return &LinkWatcher{source: source, clock: c, netdevs: map[string]bool{}, links: map[int]LinkEvent{}}
}

// Track makes the netdevs of inv's ports interesting whatever their kind.
func (w *LinkWatcher) Track(inv *discovery.Inventory) {
	netdevs := map[string]bool{}
	for _, p := range inv.Ports {
		if p.Netdev != "" {
			netdevs[p.Netdev] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.netdevs = netdevs
}

// Active reports whether a subscription is running.
func (w *LinkWatcher) Active() bool { return w.active.Load() }

// Run subscribes, and resubscribes whenever the subscription ends, until ctx ends. It
// calls notify with a reason for every relevant event, and after every resubscription,
// because events may have been lost while there was none.
func (w *LinkWatcher) Run(ctx context.Context, notify func(reason string)) {
	logger := klog.FromContext(ctx)
	backoff := minResubscribe
	subscribed := false
	for ctx.Err() == nil {
		events, err := w.source.Subscribe(ctx, func(err error) {
			logger.V(2).Info("rtnetlink link subscription reported a problem", "err", err)
		})
		if err != nil {
			logger.Error(err, "Cannot watch netdevs through rtnetlink, relying on polling", "retryIn", backoff)
			if !w.sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, maxResubscribe)
			continue
		}
		w.active.Store(true)
		backoff = minResubscribe
		if subscribed {
			notify("rtnetlink subscription restarted")
		} else {
			logger.V(1).Info("Watching netdevs through rtnetlink")
		}
		subscribed = true
		for ev := range events {
			if reason, ok := w.relevant(ev); ok {
				notify(reason)
			}
		}
		w.active.Store(false)
		if ctx.Err() != nil {
			return
		}
		logger.Info("rtnetlink link subscription ended, resubscribing", "in", backoff)
		// What was known of the links may be stale now.
		w.mu.Lock()
		w.links = map[int]LinkEvent{}
		w.mu.Unlock()
		if !w.sleep(ctx, backoff) {
			return
		}
	}
}

// relevant says whether ev changes something a port's facts depend on, and how.
func (w *LinkWatcher) relevant(ev LinkEvent) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, known := w.links[ev.Index]
	if ev.Deleted {
		delete(w.links, ev.Index)
	} else {
		w.links[ev.Index] = ev
	}
	name := ev.Name
	if name == "" {
		name = old.Name
	}
	if !w.netdevs[name] && !w.netdevs[old.Name] && !interestingTypes[ev.Type] && !interestingTypes[old.Type] {
		return "", false
	}
	switch {
	case ev.Deleted:
		return "netdev " + name + " removed", true
	case !known:
		return "netdev " + name + " added or changed", true
	case old.Name != ev.Name:
		return "netdev " + old.Name + " renamed to " + ev.Name, true
	case old.MasterIndex != ev.MasterIndex:
		return "netdev " + name + " enslaved or released", true
	case old.Carrier != ev.Carrier || old.OperState != ev.OperState:
		return "netdev " + name + " link changed to " + ev.OperState, true
	case old.MTU != ev.MTU:
		return "netdev " + name + " MTU changed", true
	}
	return "", false
}

// sleep waits d on the watcher's clock; false when ctx ended first.
func (w *LinkWatcher) sleep(ctx context.Context, d time.Duration) bool {
	t := w.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}

package health

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// fakeGauges records port_state as "ibdev/port=state" and port_flapping as
// "ibdev/port=flapping".
type fakeGauges struct {
	mu       sync.Mutex
	states   map[string]string
	sets     int
	flapping map[string]bool
}

func (g *fakeGauges) SetPortFlapping(ibdev string, port int, flapping bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.flapping == nil {
		g.flapping = map[string]bool{}
	}
	g.flapping[fmt.Sprintf("%s/%d", ibdev, port)] = flapping
}

func (g *fakeGauges) SetPortState(ibdev string, port int, state string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.states[fmt.Sprintf("%s/%d", ibdev, port)] = state
	g.sets++
}

func (g *fakeGauges) DeletePort(ibdev string, port int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.states, fmt.Sprintf("%s/%d", ibdev, port))
}

func (g *fakeGauges) snapshot() map[string]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string]string{}
	for k, v := range g.states {
		out[k] = v
	}
	return out
}

// events drains the fake recorder.
func events(rec *record.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestMonitorObserve(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	n := newTestNode(t, "disabled-port")
	rec := record.NewFakeRecorder(100)
	gauges := &fakeGauges{states: map[string]string{}}
	m, err := New(Options{SysfsRoot: n.root, Clock: testclock.NewFakeClock(epoch), Recorder: rec, NodeName: "node-1", Metrics: gauges})
	if err != nil {
		t.Fatal(err)
	}
	var last *discovery.Inventory
	scan := func() {
		inv := n.discover()
		m.Observe(ctx, Scan{Previous: last, Inventory: inv, Changed: !cmp.Equal(last, inv), Models: models(t, inv)})
		last = inv
	}

	steps := []struct {
		name       string
		change     func()
		wantEvents []string
		wantGauges map[string]string
	}{
		{
			name:       "first scan: no events, gauges of every port",
			change:     func() {},
			wantGauges: map[string]string{"mlx5_0/1": "ACTIVE", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "DOWN", "mlx5_3/1": "ACTIVE"},
		},
		{
			name:       "ACTIVE to DOWN",
			change:     func() { n.setState("mlx5_0", 1, "1: DOWN", "3: Disabled") },
			wantEvents: []string{"Warning RDMAPortStateChanged mlx5_0 port 1: ACTIVE (LinkUp) -> DOWN (Disabled)"},
			wantGauges: map[string]string{"mlx5_0/1": "DOWN", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "DOWN", "mlx5_3/1": "ACTIVE"},
		},
		{
			name:       "DOWN to INIT",
			change:     func() { n.setState("mlx5_0", 1, "2: INIT", "5: LinkUp") },
			wantEvents: []string{"Warning RDMAPortStateChanged mlx5_0 port 1: DOWN (Disabled) -> INIT (LinkUp)"},
			wantGauges: map[string]string{"mlx5_0/1": "INIT", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "DOWN", "mlx5_3/1": "ACTIVE"},
		},
		{
			name: "INIT to ACTIVE, and the disabled port comes up",
			change: func() {
				n.write("mlx5_0", 1, "state", "4: ACTIVE")
				n.setState("mlx5_2", 1, "4: ACTIVE", "5: LinkUp")
			},
			wantEvents: []string{
				"Normal RDMAPortStateChanged mlx5_0 port 1: INIT (LinkUp) -> ACTIVE (LinkUp)",
				"Normal RDMAPortStateChanged mlx5_2 port 1: DOWN (Disabled) -> ACTIVE (LinkUp)",
			},
			wantGauges: map[string]string{"mlx5_0/1": "ACTIVE", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "ACTIVE", "mlx5_3/1": "ACTIVE"},
		},
		{
			name:       "a device disappears",
			change:     func() { plugBack = n.unplug("mlx5_3") },
			wantEvents: []string{"Warning RDMAPortRemoved mlx5_3 port 1 disappeared (was ACTIVE (LinkUp))"},
			wantGauges: map[string]string{"mlx5_0/1": "ACTIVE", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "ACTIVE"},
		},
		{
			name:       "and comes back",
			change:     func() { plugBack() },
			wantEvents: []string{"Normal RDMAPortAdded mlx5_3 port 1 appeared: ACTIVE (LinkUp)"},
			wantGauges: map[string]string{"mlx5_0/1": "ACTIVE", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "ACTIVE", "mlx5_3/1": "ACTIVE"},
		},
		{
			name:       "a rescan without change",
			change:     func() {},
			wantGauges: map[string]string{"mlx5_0/1": "ACTIVE", "mlx5_1/1": "ACTIVE", "mlx5_2/1": "ACTIVE", "mlx5_3/1": "ACTIVE"},
		},
	}
	for _, s := range steps {
		t.Run(s.name, func(t *testing.T) {
			s.change()
			scan()
			if diff := cmp.Diff(s.wantEvents, events(rec)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(s.wantGauges, gauges.snapshot()); diff != "" {
				t.Errorf("gauges (-want +got):\n%s", diff)
			}
		})
	}
	// The node event refers to the Node the way kubectl describe finds it.
	if ref := NodeRef("node-1"); ref.Kind != "Node" || ref.Name != "node-1" || ref.UID != "node-1" || ref.Namespace != "" {
		t.Errorf("node reference %+v", ref)
	}
}

var plugBack func()

// TestMonitorRun: a poll that finds a change, a netlink event and the periodic rescan
// each become a signal; signals nobody takes yet merge, a change winning over a rescan.
// It runs in a synctest bubble, so that "no signal" is checked once the monitor waits
// rather than after a while.
func TestMonitorRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		n := newTestNode(t, "disabled-port")
		c := testclock.NewFakeClock(epoch)
		links := newFakeLinks()
		gauges := &fakeGauges{states: map[string]string{}}
		m, err := New(Options{SysfsRoot: n.root, PollInterval: time.Second, RescanInterval: 30 * time.Second, Links: links, Clock: c, Metrics: gauges})
		if err != nil {
			t.Fatal(err)
		}
		inv := n.discover()
		m.Observe(ctx, Scan{Inventory: inv, Changed: true, Models: models(t, inv)})
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(ctx)
		}()
		netlink := <-links.subscribed
		waitFor(t, m.NetlinkActive)
		waitFor(t, func() bool { return c.Waiters() >= 2 }) // the poll and rescan tickers

		receive := func() Signal {
			t.Helper()
			select {
			case s := <-m.C():
				return s
			case <-time.After(10 * time.Second):
				t.Fatal("no signal")
			}
			return Signal{}
		}
		// expectNone checks, once everything in the bubble waits, that no signal is pending.
		expectNone := func() {
			t.Helper()
			synctest.Wait()
			select {
			case s := <-m.C():
				t.Fatalf("unexpected signal %+v", s)
			default:
			}
		}

		// step moves the clock by a poll interval and waits for the poll to be done.
		step := func() {
			t.Helper()
			c.Step(time.Second)
			now := c.Now()
			waitFor(t, func() bool { return m.LastPoll().Equal(now) })
		}

		// A quiet poll: no signal, health verified.
		step()
		expectNone()

		// The port goes down: the next poll signals.
		n.setState("mlx5_1", 1, "1: DOWN", "2: Polling")
		step()
		s := receive()
		want := Signal{Source: SourcePoll, Reason: "mlx5_1 port 1: ACTIVE (LinkUp) -> DOWN (Polling)", At: epoch.Add(2 * time.Second)}
		if s != want {
			t.Errorf("signal %+v, want %+v", s, want)
		}
		// The gauge follows the poll, before any rescan.
		waitFor(t, func() bool { return gauges.snapshot()["mlx5_1/1"] == "DOWN" })
		report, _, _ := m.reporter.Report()
		if i := slices.IndexFunc(report.Devices, func(d kubeletplugin.DeviceHealth) bool { return d.DeviceName == "mlx5-1-p1" }); i < 0 || report.Devices[i].Health != "Unhealthy" {
			t.Errorf("health of mlx5-1-p1 after the poll: %+v", report.Devices)
		}

		// Nobody rescans yet: later polls and the rescan merge into one pending signal that
		// keeps the first change's time.
		for range 30 {
			step()
		}
		s = receive()
		if s.Source != SourcePoll || !s.At.Equal(epoch.Add(3*time.Second)) {
			t.Errorf("merged signal %+v", s)
		}
		m.Observe(ctx, Scan{Previous: inv, Inventory: n.discover(), Changed: true})
		expectNone()

		// A netlink event signals at once, without a poll.
		netlink <- LinkEvent{Index: 4, Name: "ibp64s0", Type: "ipoib", OperState: "down"}
		s = receive()
		if s.Source != SourceNetlink || s.Reason != "netdev ibp64s0 added or changed" || !s.At.Equal(c.Now()) {
			t.Errorf("netlink signal %+v", s)
		}

		// The periodic rescan.
		for range 29 {
			step()
		}
		s = receive()
		if s.Source != SourceRescan || s.Change() {
			t.Errorf("rescan signal %+v", s)
		}
		cancel()
		<-done
	})
}

// TestMonitorPollsAtStart: a port that changed between the plugin's first scan and the
// start of watching is signalled at once, not a poll interval later.
func TestMonitorPollsAtStart(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n := newTestNode(t, "disabled-port")
	c := testclock.NewFakeClock(epoch)
	m, err := New(Options{SysfsRoot: n.root, PollInterval: time.Hour, Clock: c, Metrics: &fakeGauges{states: map[string]string{}}})
	if err != nil {
		t.Fatal(err)
	}
	inv := n.discover()
	m.Observe(ctx, Scan{Inventory: inv, Changed: true, Models: models(t, inv)})
	n.setState("mlx5_0", 1, "1: DOWN", "3: Disabled")
	go m.Run(ctx)
	select {
	case s := <-m.C():
		if s.Source != SourcePoll || !s.At.Equal(epoch) {
			t.Errorf("signal %+v, want a poll signal at the start", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no signal without the clock moving: the first poll waited for the interval")
	}
}

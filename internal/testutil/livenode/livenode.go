// Package livenode is a mock node with a running health monitor and slice publisher,
// whose sysfs files a test changes the way the kernel would: the fixture of the tests of
// pkg/publish (republishing) and of pkg/plugin (the health stream through the kubelet
// plugin helper).
package livenode

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// The node's driver, name and pool.
const (
	DriverName = devicemodel.DefaultDriverName
	NodeName   = "node-1"
	PoolName   = NodeName + devicemodel.PoolSuffix
)

// Node is a mock node whose monitor and publisher run until the test ends.
type Node struct {
	t *testing.T
	// Ctx ends with the test; the monitor and the publisher run in it.
	Ctx context.Context
	// Root is the node's sysfs root.
	Root    string
	Clock   clock.WithTicker
	Monitor *health.Monitor
	Pub     *publish.Publisher
	// Sink records every publish.
	Sink    *Sink
	Metrics *metrics.Plugin
}

// Options shape a Node.
type Options struct {
	// Clock is the monitor's and the publisher's; a *testclock.FakeClock makes Step work.
	Clock clock.WithTicker
	// Poll is the monitor's poll interval.
	Poll time.Duration
	// MaxPerMinute is the limiter's budget; 0 never damps.
	MaxPerMinute int
	// Effect is the taint effect of a port that is not ACTIVE; empty is NoSchedule.
	Effect resourceapi.DeviceTaintEffect
	// Next receives the publishes after the Sink; nil is nobody.
	Next publish.ResourcePublisher
	// Flapping turns the flapping check on, reading the node's counters.
	Flapping health.FlapOptions
}

// New writes a mock node of profile, publishes it once in the partitionable model and
// starts its monitor and publisher, which stop when the test ends.
func New(t *testing.T, profile string, o Options) *Node {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	n := &Node{t: t, Ctx: ctx, Root: filepath.Join(dir, mocknode.SysDir), Clock: o.Clock, Sink: &Sink{next: o.Next}, Metrics: metrics.NewPlugin()}
	var err error
	n.Monitor, err = health.New(health.Options{SysfsRoot: n.Root, PollInterval: o.Poll, Clock: o.Clock, Metrics: n.Metrics,
		Counters: portcounters.NewReader(n.Root), Flapping: o.Flapping})
	if err != nil {
		t.Fatal(err)
	}
	limiter, err := health.NewLimiter(o.Clock, o.MaxPerMinute)
	if err != nil {
		t.Fatal(err)
	}
	n.Pub = publish.New(discovery.New(discovery.Options{SysfsRoot: n.Root}),
		devicemodel.Options{DriverName: DriverName, NodeName: NodeName}, publish.ModelPartitionable,
		publish.Options{Metrics: n.Metrics, Clock: o.Clock, Limiter: limiter, Observer: n.Monitor, TaintEffect: o.Effect, Flapping: n.Monitor.Flapping})
	n.Pub.SetSink(n.Sink)
	if err := n.Pub.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); n.Monitor.Run(ctx) }()
	go func() { defer wg.Done(); n.Pub.Run(ctx, n.Monitor) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
	if fake, ok := o.Clock.(*testclock.FakeClock); ok {
		// The poll ticker must exist before a test steps the clock; the monitor makes it
		// after its first poll, so that the counters' baseline predates what a test bumps.
		testwait.For(t, "poll ticker", fake.HasWaiters)
	}
	return n
}

// SetState writes the state and phys_state files of a port.
func (n *Node) SetState(ibdev string, port int, state, phys string) {
	n.t.Helper()
	dir := filepath.Join(n.Root, "class/infiniband", ibdev, "ports", strconv.Itoa(port))
	for file, v := range map[string]string{"state": state, "phys_state": phys} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v+"\n"), 0o644); err != nil {
			n.t.Fatal(err)
		}
	}
}

// BumpCounter adds by to a counter file of a port, as the adapter would.
func (n *Node) BumpCounter(ibdev string, port int, file string, by uint64) {
	n.t.Helper()
	p := filepath.Join(n.Root, "class/infiniband", ibdev, "ports", strconv.Itoa(port), "counters", file)
	b, err := os.ReadFile(p)
	if err != nil {
		n.t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(strconv.FormatUint(v+by, 10)+"\n"), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// Step moves the fake clock by d and waits until the poll it caused is done.
func (n *Node) Step(d time.Duration) {
	n.t.Helper()
	fake := n.Clock.(*testclock.FakeClock)
	fake.Step(d)
	now := fake.Now()
	testwait.For(n.t, "poll", func() bool { return !n.Monitor.LastPoll().Before(now) })
}

// WaitPublished waits until the sink has seen want publishes, and then until the
// monitor and the publisher wait, so that a publish too many would have been made. Only
// in a synctest bubble.
func (n *Node) WaitPublished(want int) resourceslice.DriverResources {
	n.t.Helper()
	testwait.For(n.t, "publishes", func() bool { return n.Sink.Count() >= want })
	synctest.Wait()
	if got := n.Sink.Count(); got != want {
		n.t.Fatalf("%d publishes, want %d", got, want)
	}
	return n.Sink.Last()
}

// Sink records publishes and passes them on to the next publisher, if set.
type Sink struct {
	next publish.ResourcePublisher
	mu   sync.Mutex
	all  []resourceslice.DriverResources
	at   []time.Time
}

// PublishResources implements publish.ResourcePublisher.
func (s *Sink) PublishResources(ctx context.Context, r resourceslice.DriverResources) error {
	if s.next != nil {
		if err := s.next.PublishResources(ctx, r); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, r)
	s.at = append(s.at, time.Now())
	return nil
}

// Count is the number of publishes.
func (s *Sink) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

// Last is the last publish.
func (s *Sink) Last() resourceslice.DriverResources {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.all[len(s.all)-1]
}

// At is when publish i (from 0) returned from the sink, on the real clock, and whether
// there was one.
func (s *Sink) At(i int) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i >= len(s.at) {
		return time.Time{}, false
	}
	return s.at[i], true
}

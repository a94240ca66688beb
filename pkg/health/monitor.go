package health

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// DefaultPollInterval is how often port states are read: a change is republished within
// about this long, well inside the few seconds a scheduler or an operator notices.
const DefaultPollInterval = time.Second

// Sources of a Signal, also the republish_total trigger label.
const (
	SourcePoll    = "poll"
	SourceNetlink = "netlink"
	SourceRescan  = "rescan"
)

// Signal asks the publisher to scan the node again.
type Signal struct {
	// Source is what noticed the change: SourcePoll, SourceNetlink or SourceRescan.
	Source string
	// Reason says what changed, for the log.
	Reason string
	// At is when the change was noticed; for a rescan, when it was due.
	At time.Time
}

// Change reports whether the signal stands for a change that was noticed, as opposed to
// the periodic rescan.
func (s Signal) Change() bool { return s.Source != SourceRescan }

// Merge combines two pending signals into one: a noticed change wins over a rescan, and
// otherwise the earlier signal, so that latency is measured from the first change.
func Merge(a, b Signal) Signal {
	if !a.Change() && b.Change() {
		return b
	}
	return a
}

// Scan is what the publisher tells the monitor after every successful scan.
type Scan struct {
	// Previous is the inventory before this scan, nil at the first; Inventory is this
	// scan's. Changed is false when they are equal.
	Previous, Inventory *discovery.Inventory
	Changed             bool
	// Models are the device models of Inventory: the published one and the other one.
	Models []*devicemodel.Result
	// Flapping are the ports the models were built with as flapping (Monitor.Flapping
	// at the time of the build).
	Flapping map[devicemodel.PortID]string
}

// PortMetrics receives port states; *metrics.Plugin implements it.
type PortMetrics interface {
	SetPortState(ibdev string, port int, state string)
	SetPortFlapping(ibdev string, port int, flapping bool)
	DeletePort(ibdev string, port int)
}

// CounterReader reads the counters of the published ports; *portcounters.Reader
// implements it. The monitor tells it the ports after every scan and reads link_downed
// and symbol_error on every poll.
type CounterReader interface {
	Track(ports []portcounters.Port)
	ReadLinkErrors() []portcounters.LinkErrors
}

// Options configure a Monitor.
type Options struct {
	// SysfsRoot is where sysfs is read from.
	SysfsRoot string
	// PollInterval is how often port states are polled; default DefaultPollInterval.
	PollInterval time.Duration
	// RescanInterval is how often a full scan is asked for whatever happened, for the
	// facts nothing watches (firmware version, GID tables); zero disables it.
	RescanInterval time.Duration
	// Links is the rtnetlink source; nil polls only, as on a mock node.
	Links LinkSource
	// Clock is the clock of polls, timers and timestamps; nil is the real clock.
	Clock clock.WithTicker
	// Recorder receives Node events and NodeName names the node; nil records none.
	Recorder EventRecorder
	NodeName string
	// Metrics receives the port states; nil records none.
	Metrics PortMetrics
	// Counters reads the published ports' counters: the monitor tracks the ports for it
	// and, with Flapping enabled, polls link_downed and symbol_error; nil reads none.
	Counters CounterReader
	// Flapping are the thresholds of the flapping check (FlapOptionsFrom); the zero
	// value checks nothing.
	Flapping FlapOptions
}

// Monitor watches the node between scans and tells the publisher (C) when to scan
// again, tracks what each scan found (Observe), and streams device health (Watch).
type Monitor struct {
	opts     Options
	clock    clock.WithTicker
	poller   *Poller
	links    *LinkWatcher
	reporter *Reporter
	node     *corev1.ObjectReference

	signals chan Signal
	// linkSignals carries the watcher's signals into Run; one pending is enough, the
	// earlier one.
	linkSignals chan Signal

	mu     sync.Mutex
	gauges map[PortID]string
	// flaps decides which ports flap; published is the set the published slices were
	// built with, which every poll compares with, as the poller compares states with the
	// last scan: a difference whose republish was held back or failed is never forgotten.
	flaps      *FlapDetector
	published  map[devicemodel.PortID]string
	flapGauges map[PortID]bool
}

// New returns a monitor; Run starts it.
func New(opts Options) (*Monitor, error) {
	if opts.SysfsRoot == "" {
		return nil, errors.New("health monitor: sysfs root is required")
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.PollInterval < 0 || opts.RescanInterval < 0 {
		return nil, fmt.Errorf("health monitor: intervals must not be negative, got poll %s, rescan %s", opts.PollInterval, opts.RescanInterval)
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := &Monitor{
		opts:        opts,
		clock:       opts.Clock,
		poller:      NewPoller(opts.SysfsRoot),
		reporter:    NewReporter(opts.Clock),
		node:        NodeRef(opts.NodeName),
		signals:     make(chan Signal),
		linkSignals: make(chan Signal, 1),
		gauges:      map[PortID]string{},
		flaps:       NewFlapDetector(opts.Flapping),
		flapGauges:  map[PortID]bool{},
	}
	if opts.Links != nil {
		m.links = NewLinkWatcher(opts.Links, opts.Clock)
	}
	return m, nil
}

// C delivers the rescan requests; the publisher's trigger.
func (m *Monitor) C() <-chan Signal { return m.signals }

// Watch streams device health to the kubelet; see Reporter.Watch.
func (m *Monitor) Watch(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	return m.reporter.Watch(ctx, reports)
}

// LastPoll returns when the ports were last read successfully (or taken from a scan).
func (m *Monitor) LastPoll() time.Time { return m.reporter.Verified() }

// NetlinkActive reports whether netdev events arrive through rtnetlink right now.
func (m *Monitor) NetlinkActive() bool { return m.links != nil && m.links.Active() }

// Observe takes in a scan: what to poll from now on and, when the inventory changed,
// the devices to report, the port state gauges, a log line and a Node event per port
// that changed. It is called by the publisher and must not block.
func (m *Monitor) Observe(ctx context.Context, scan Scan) {
	if scan.Inventory == nil {
		return
	}
	m.poller.Track(scan.Inventory)
	if m.links != nil {
		m.links.Track(scan.Inventory)
	}
	published := publishedPorts(scan.Models)
	if m.opts.Counters != nil {
		m.opts.Counters.Track(published)
	}
	m.mu.Lock()
	m.published = maps.Clone(scan.Flapping)
	m.mu.Unlock()
	if !scan.Changed {
		return
	}
	m.initFlapGauges(published)
	states := statesOf(scan.Inventory)
	m.reporter.SetDevices(scan.Models...)
	m.reporter.SetStates(states, m.clock.Now())
	m.setGauges(states, true)
	logger := klog.FromContext(ctx)
	transitions := Diff(scan.Previous, scan.Inventory)
	for _, t := range transitions {
		logger.Info("RDMA port changed", "ibdev", t.Port.IBDev, "port", t.Port.Port, "change", string(t.Kind),
			"from", t.Old.String(), "to", t.New.String())
	}
	if m.opts.Recorder != nil {
		emitEvents(m.opts.Recorder, m.node, transitions)
	}
}

// setGauges updates the port state gauges that changed; with all, ports missing from
// states are removed.
func (m *Monitor) setGauges(states map[PortID]PortState, all bool) {
	if m.opts.Metrics == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, s := range states {
		if old, ok := m.gauges[id]; !ok || old != s.State {
			m.opts.Metrics.SetPortState(id.IBDev, id.Port, s.State)
			m.gauges[id] = s.State
		}
	}
	if !all {
		return
	}
	for id := range m.gauges {
		if _, ok := states[id]; !ok {
			m.opts.Metrics.DeletePort(id.IBDev, id.Port)
			delete(m.gauges, id)
		}
	}
}

// Run polls, listens to rtnetlink and asks for rescans until ctx ends.
func (m *Monitor) Run(ctx context.Context) {
	logger := klog.FromContext(ctx)
	logger.Info("Watching RDMA port health", "pollInterval", m.opts.PollInterval, "rescanInterval", m.opts.RescanInterval, "netlink", m.links != nil)
	var next Signal
	pending := false
	add := func(s Signal) {
		if pending {
			next = Merge(next, s)
		} else {
			next, pending = s, true
		}
	}
	var pollErr string
	pollOnce := func() {
		s, err := m.poll(logger)
		if err != nil {
			if err.Error() != pollErr {
				logger.Error(err, "Polling RDMA ports failed; device health is no longer vouched for")
				pollErr = err.Error()
			}
			return
		}
		pollErr = ""
		if s != nil {
			logger.V(4).Info("Port poll found a change", "reason", s.Reason)
			add(*s)
		}
	}
	if m.links != nil {
		go m.links.Run(ctx, m.linkChanged)
	}
	// The first poll comes at once: the inventory was scanned before the plugin registered
	// with the kubelet, and a port that changed in between must not wait a whole interval.
	pollOnce()
	// The tickers start after the first poll: whoever waits on the clock (a test stepping
	// a fake one) knows that the poll made the baseline of the counters.
	poll := m.clock.NewTicker(m.opts.PollInterval)
	defer poll.Stop()
	var rescan <-chan time.Time
	if m.opts.RescanInterval > 0 {
		t := m.clock.NewTicker(m.opts.RescanInterval)
		defer t.Stop()
		rescan = t.C()
	}
	for {
		// Sending is only enabled while a signal is pending; meanwhile new ones merge.
		var out chan<- Signal
		if pending {
			out = m.signals
		}
		select {
		case <-ctx.Done():
			return
		case <-poll.C():
			pollOnce()
		case at := <-rescan:
			add(Signal{Source: SourceRescan, Reason: "periodic rescan", At: at})
		case s := <-m.linkSignals:
			add(s)
		case out <- next:
			pending = false
		}
	}
}

// poll reads the ports once, updates health and gauges, and returns a signal when the
// node differs from the last scan, or the flapping ports from the published ones.
func (m *Monitor) poll(logger klog.Logger) (*Signal, error) {
	res, err := m.poller.Poll()
	now := m.clock.Now()
	if err != nil {
		return nil, err
	}
	m.reporter.SetStates(res.States, now)
	m.setGauges(res.States, false)
	res.Changes = append(res.Changes, m.pollFlaps(logger, now)...)
	if len(res.Changes) == 0 {
		return nil, nil
	}
	reason := strings.Join(res.Changes[:min(len(res.Changes), 3)], "; ")
	if len(res.Changes) > 3 {
		reason += fmt.Sprintf("; and %d more", len(res.Changes)-3)
	}
	return &Signal{Source: SourcePoll, Reason: reason, At: now}, nil
}

// linkChanged is the link watcher's notify: it never blocks the watcher.
func (m *Monitor) linkChanged(reason string) {
	select {
	case m.linkSignals <- Signal{Source: SourceNetlink, Reason: reason, At: m.clock.Now()}:
	default: // one is pending already, and it is earlier
	}
}

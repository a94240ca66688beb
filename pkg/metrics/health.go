package metrics

import (
	"strconv"
	"time"

	"k8s.io/component-base/metrics"
)

// PortStates are the logical port states the port_state gauge has a series for, plus
// Unknown for a state that could not be read.
var PortStates = []string{"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER", "Unknown"}

// healthMetrics are the metrics of port health and republishing.
type healthMetrics struct {
	portState         *metrics.GaugeVec
	portFlapping      *metrics.GaugeVec
	republishes       *metrics.CounterVec
	republishLatency  *metrics.Histogram
	dampedRepublishes *metrics.Counter
}

// RepublishTriggers are the values of republish_total's trigger label.
var RepublishTriggers = []string{"poll", "netlink", "rescan", "fallback"}

func newHealthMetrics() healthMetrics {
	return healthMetrics{
		portState: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "port_state", StabilityLevel: Stability,
			Help: "1 for the logical state each RDMA port is in, 0 for the others; device is the RDMA device (ibdev).",
		}, []string{"device", "port", "state"}),
		portFlapping: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "port_flapping", StabilityLevel: Stability,
			Help: "1 while the RDMA port's devices carry the rdma.dra.io/port-flapping taint (link_downed or symbol_error rose over the node's thresholds), 0 otherwise; device is the RDMA device (ibdev).",
		}, []string{"device", "port"}),
		republishes: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "republish_total", StabilityLevel: Stability,
			Help: "ResourceSlices republished after a change, by what noticed it (poll, netlink, rescan, fallback).",
		}, []string{"trigger"}),
		// A poll notices a change within its interval (1s); the rest is a scan and a
		// hand-over to the ResourceSlice controller, milliseconds, unless damped.
		republishLatency: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "republish_latency_seconds", StabilityLevel: Stability,
			Help:    "Time from noticing a change (poll or netlink) to the ResourceSlice controller having the new slices, damping included.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
		}),
		dampedRepublishes: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: Namespace, Name: "republish_damped_total", StabilityLevel: Stability,
			Help: "Republishes held back by --max-republish-per-minute; each was published later with the state of that time.",
		}),
	}
}

func (h healthMetrics) registerables() []metrics.Registerable {
	return []metrics.Registerable{h.portState, h.portFlapping, h.republishes, h.republishLatency, h.dampedRepublishes}
}

// makeSeries makes the series that exist before the first republish; only a registered
// vector makes them.
func (h healthMetrics) makeSeries() {
	for _, t := range RepublishTriggers {
		h.republishes.WithLabelValues(t)
	}
}

// SetPortState sets the port_state series of one port: 1 for state, 0 for the others. An
// empty or unlisted state counts as Unknown.
func (m *Plugin) SetPortState(ibdev string, port int, state string) {
	known := false
	for _, s := range PortStates {
		known = known || s == state
	}
	if !known {
		state = "Unknown"
	}
	p := strconv.Itoa(port)
	for _, s := range PortStates {
		v := 0.0
		if s == state {
			v = 1
		}
		m.portState.WithLabelValues(ibdev, p, s).Set(v)
	}
}

// DeletePort removes the port_state and port_flapping series of a port that is gone.
func (m *Plugin) DeletePort(ibdev string, port int) {
	labels := map[string]string{"device": ibdev, "port": strconv.Itoa(port)}
	m.portState.DeletePartialMatch(labels)
	m.portFlapping.DeletePartialMatch(labels)
}

// SetPortFlapping sets the port_flapping series of one port.
func (m *Plugin) SetPortFlapping(ibdev string, port int, flapping bool) {
	v := 0.0
	if flapping {
		v = 1
	}
	m.portFlapping.WithLabelValues(ibdev, strconv.Itoa(port)).Set(v)
}

// Republished records a republish noticed by trigger.
func (m *Plugin) Republished(trigger string) { m.republishes.WithLabelValues(trigger).Inc() }

// ObserveRepublishLatency records the time from noticing a change to the slices being
// handed over.
func (m *Plugin) ObserveRepublishLatency(d time.Duration) {
	m.republishLatency.Observe(d.Seconds())
}

// RepublishDamped records a republish held back by damping.
func (m *Plugin) RepublishDamped() { m.dampedRepublishes.Inc() }

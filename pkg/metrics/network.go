package metrics

import (
	"time"

	"k8s.io/component-base/metrics"
)

// networkMetrics are the metrics of network attachment (docs/network-attachment.md).
type networkMetrics struct {
	attachLatency *metrics.Histogram
	attaches      *metrics.CounterVec
}

func newNetworkMetrics() networkMetrics {
	return networkMetrics{
		// Attaching runs inside the runtime's pod sandbox creation: tens of
		// milliseconds, and the runtime's NRI request timeout (2 s by default) above.
		attachLatency: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "network_attach_duration_seconds", StabilityLevel: Stability,
			Help:    "Duration of attaching the claimed networks of one pod sandbox.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2},
		}),
		attaches: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "network_attaches_total", StabilityLevel: Stability,
			Help: "Pod sandboxes whose claimed networks were attached, by result.",
		}, []string{"result"}),
	}
}

func (n networkMetrics) registerables() []metrics.Registerable {
	return []metrics.Registerable{n.attachLatency, n.attaches}
}

// ObserveAttach records the attachment of one pod sandbox's networks.
func (n networkMetrics) ObserveAttach(err error, d time.Duration) {
	result := ResultSuccess
	if err != nil {
		result = ResultError
	}
	n.attachLatency.Observe(d.Seconds())
	n.attaches.WithLabelValues(result).Inc()
}

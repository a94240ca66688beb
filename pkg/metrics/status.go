package metrics

import (
	"time"

	"k8s.io/component-base/metrics"
)

// Outcomes of a claim status update, the "result" label of claim_status_updates_total.
const (
	// StatusWritten: the API server has the claim's status.
	StatusWritten = "written"
	// StatusCoalesced: a newer status of the same claim replaced this one before it
	// was written; the newer one is written instead.
	StatusCoalesced = "coalesced"
	// StatusForgotten: the claim was unprepared before its status was written.
	StatusForgotten = "forgotten"
	// StatusRetried: a write failed and is retried after a backoff.
	StatusRetried = "retried"
	// StatusFailed: the API server refused the write for good (forbidden, the claim is
	// gone or was replaced, invalid); the only way an update is dropped.
	StatusFailed = "failed"
)

// StatusResults are the values of claim_status_updates_total's result label.
var StatusResults = []string{StatusWritten, StatusCoalesced, StatusForgotten, StatusRetried, StatusFailed}

// statusMetrics are the metrics of the claim status writer.
type statusMetrics struct {
	statusUpdates *metrics.CounterVec
	statusPending *metrics.Gauge
	statusLag     *metrics.Histogram
}

func newStatusMetrics() statusMetrics {
	return statusMetrics{
		statusUpdates: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "claim_status_updates_total", StabilityLevel: Stability,
			Help: "Claim status updates by outcome (written, coalesced, forgotten, retried, failed); failed ones are the only ones lost.",
		}, []string{"result"}),
		statusPending: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "claim_status_pending", StabilityLevel: Stability,
			Help: "Prepared claims whose latest status is not written yet.",
		}),
		// A write is one request on the status client's own budget: milliseconds when
		// idle, seconds when a burst of prepares waits for the budget or the API server
		// is down and the backoff grows.
		statusLag: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "claim_status_lag_seconds", StabilityLevel: Stability,
			Help:    "Time from a claim's status change (prepare, network attachment) to the API server having it.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
		}),
	}
}

func (s statusMetrics) registerables() []metrics.Registerable {
	return []metrics.Registerable{s.statusUpdates, s.statusPending, s.statusLag}
}

// makeSeries makes the series that exist before the first update; only a registered
// vector makes them.
func (s statusMetrics) makeSeries() {
	for _, r := range StatusResults {
		s.statusUpdates.WithLabelValues(r)
	}
}

// ObserveClaimStatus counts one claim status update with its outcome (StatusResults).
func (m *Plugin) ObserveClaimStatus(result string) { m.statusUpdates.WithLabelValues(result).Inc() }

// SetClaimStatusPending sets the number of claims whose status is not written yet.
func (m *Plugin) SetClaimStatusPending(n int) { m.statusPending.Set(float64(n)) }

// ObserveClaimStatusLag records the time from a status change to its write.
func (m *Plugin) ObserveClaimStatusLag(d time.Duration) { m.statusLag.Observe(d.Seconds()) }

// Package metrics holds the Prometheus metrics of the kubelet plugin, registered in a
// registry of their own so that tests and the HTTP handler see exactly these.
package metrics

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// Namespace prefixes every metric name.
const Namespace = "rdma_dra"

// Results of an operation, the "result" label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Plugin holds the kubelet plugin's metrics.
type Plugin struct {
	registry *prometheus.Registry

	prepare          *prometheus.CounterVec
	unprepare        *prometheus.CounterVec
	prepareLatency   prometheus.Histogram
	unprepareLatency prometheus.Histogram
	devices          *prometheus.GaugeVec
	preparedClaims   prometheus.Gauge
	publishes        prometheus.Counter
	publishErrors    *prometheus.CounterVec
	checkpointErrors *prometheus.CounterVec
	cleanupRemoved   *prometheus.CounterVec
	model            *prometheus.GaugeVec
	healthMetrics
	statusMetrics
	networkMetrics
}

// NewPlugin creates the metrics and registers them, with the Go and process collectors,
// in a new registry.
func NewPlugin() *Plugin {
	// Prepare writes a few small files and may call the API server once: most calls take
	// milliseconds, a slow disk or API server shows up in the upper buckets.
	buckets := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	m := &Plugin{
		registry: prometheus.NewRegistry(),
		prepare: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "prepare_claims_total",
			Help: "ResourceClaims prepared, by result.",
		}, []string{"result"}),
		unprepare: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "unprepare_claims_total",
			Help: "ResourceClaims unprepared, by result.",
		}, []string{"result"}),
		prepareLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "prepare_duration_seconds",
			Help: "Duration of NodePrepareResources calls as seen by the plugin.", Buckets: buckets,
		}),
		unprepareLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "unprepare_duration_seconds",
			Help: "Duration of NodeUnprepareResources calls as seen by the plugin.", Buckets: buckets,
		}),
		devices: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "devices",
			Help: "Published devices by mode (exclusive, shared) and state (free, prepared).",
		}, []string{"mode", "state"}),
		preparedClaims: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "prepared_claims",
			Help: "ResourceClaims in the checkpoint, whatever their phase.",
		}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: Namespace, Name: "publish_total",
			Help: "Times the plugin handed a changed set of devices to the ResourceSlice controller.",
		}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "publish_errors_total",
			Help: "Errors while discovering, building or publishing ResourceSlices, by stage.",
		}, []string{"stage"}),
		checkpointErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "checkpoint_errors_total",
			Help: "Checkpoint failures by operation (load, save, quarantine).",
		}, []string{"op"}),
		cleanupRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "cleanup_removed_total",
			Help: "Leftovers of deleted claims removed by the cleanup loop, by kind (entry, spec).",
		}, []string{"kind"}),
		model: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "device_model",
			Help: "1 for the device model this node publishes (partitionable or legacy).",
		}, []string{"model"}),
		healthMetrics:  newHealthMetrics(),
		statusMetrics:  newStatusMetrics(),
		networkMetrics: newNetworkMetrics(),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "build_info",
		Help: "Always 1; the labels describe the build.",
	}, []string{"version", "git_commit", "go_version"})
	buildInfo.WithLabelValues(version.Version, version.GitCommit, runtime.Version()).Set(1)

	m.registry.MustRegister(
		m.prepare, m.unprepare, m.prepareLatency, m.unprepareLatency, m.devices,
		m.preparedClaims, m.publishes, m.publishErrors, m.checkpointErrors, m.cleanupRemoved,
		m.model, buildInfo,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	m.registry.MustRegister(m.healthMetrics.collectors()...)
	m.registry.MustRegister(m.statusMetrics.collectors()...)
	m.registry.MustRegister(m.networkMetrics.collectors()...)
	// Make the labelled series exist from the start, so that rate() and absent() work
	// before the first event.
	for _, r := range []string{ResultSuccess, ResultError} {
		m.prepare.WithLabelValues(r)
		m.unprepare.WithLabelValues(r)
	}
	return m
}

// Registry returns the registry holding the metrics.
func (m *Plugin) Registry() *prometheus.Registry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format.
func (m *Plugin) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// ObservePrepare records one prepare call that took d and the result of each of its claims.
func (m *Plugin) ObservePrepare(d time.Duration, ok, failed int) {
	m.prepareLatency.Observe(d.Seconds())
	m.prepare.WithLabelValues(ResultSuccess).Add(float64(ok))
	m.prepare.WithLabelValues(ResultError).Add(float64(failed))
}

// ObserveUnprepare records one unprepare call like ObservePrepare.
func (m *Plugin) ObserveUnprepare(d time.Duration, ok, failed int) {
	m.unprepareLatency.Observe(d.Seconds())
	m.unprepare.WithLabelValues(ResultSuccess).Add(float64(ok))
	m.unprepare.WithLabelValues(ResultError).Add(float64(failed))
}

// DeviceCount is the number of devices of one mode in one state.
type DeviceCount struct {
	Mode, State string
	Count       int
}

// SetDevices replaces the device gauges with counts.
func (m *Plugin) SetDevices(counts []DeviceCount) {
	m.devices.Reset()
	for _, c := range counts {
		m.devices.WithLabelValues(c.Mode, c.State).Set(float64(c.Count))
	}
}

// SetPreparedClaims sets the number of claims in the checkpoint.
func (m *Plugin) SetPreparedClaims(n int) { m.preparedClaims.Set(float64(n)) }

// Published records a successful hand-over of devices to the ResourceSlice controller.
func (m *Plugin) Published() { m.publishes.Inc() }

// PublishError records a failure at stage: discover, build, publish or apiserver.
func (m *Plugin) PublishError(stage string) { m.publishErrors.WithLabelValues(stage).Inc() }

// CheckpointError records a checkpoint failure of op: load, save or quarantine.
func (m *Plugin) CheckpointError(op string) { m.checkpointErrors.WithLabelValues(op).Inc() }

// CleanupRemoved records n leftovers of kind (entry or spec) removed by the cleanup loop.
func (m *Plugin) CleanupRemoved(kind string, n int) {
	m.cleanupRemoved.WithLabelValues(kind).Add(float64(n))
}

// SetModel marks model as the node's device model.
func (m *Plugin) SetModel(model string) {
	m.model.Reset()
	m.model.WithLabelValues(model).Set(1)
}

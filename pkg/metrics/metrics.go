// Package metrics holds the Prometheus metrics of the kubelet plugin, declared with
// k8s.io/component-base/metrics (each with a stability level, as the Kubernetes
// components' are) and registered in a KubeRegistry of their own so that tests and the
// HTTP handler see exactly these.
package metrics

import (
	"net/http"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/component-base/metrics"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// Namespace prefixes every metric name.
const Namespace = "rdma_dra"

// Stability is the stability level of every metric of the driver. ALPHA: none has been
// through a release that promised its name and labels, and the driver's API is
// v1alpha1 itself; a metric that alerts come to rely on (port_state is the first
// candidate) can be promoted to BETA or STABLE, after which component-base keeps it
// through the deprecation policy.
const Stability = metrics.ALPHA

// Results of an operation, the "result" label.
const (
	ResultSuccess = "success"
	ResultError   = "error"
)

// Plugin holds the kubelet plugin's metrics.
type Plugin struct {
	registry metrics.KubeRegistry

	prepare          *metrics.CounterVec
	unprepare        *metrics.CounterVec
	prepareLatency   *metrics.Histogram
	unprepareLatency *metrics.Histogram
	devices          *metrics.GaugeVec
	preparedClaims   *metrics.Gauge
	publishes        *metrics.Counter
	publishErrors    *metrics.CounterVec
	checkpointErrors *metrics.CounterVec
	cleanupRemoved   *metrics.CounterVec
	model            *metrics.GaugeVec
	buildInfo        *metrics.GaugeVec
	healthMetrics
	statusMetrics
	networkMetrics
	portCounterMetrics
}

// NewPlugin creates the metrics and registers them, with the Go and process collectors,
// in a new KubeRegistry.
func NewPlugin() *Plugin {
	// Prepare writes a few small files and may call the API server once: most calls take
	// milliseconds, a slow disk or API server shows up in the upper buckets.
	buckets := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
	m := &Plugin{
		registry: metrics.NewKubeRegistry(),
		prepare: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "prepare_claims_total", StabilityLevel: Stability,
			Help: "ResourceClaims prepared, by result.",
		}, []string{"result"}),
		unprepare: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "unprepare_claims_total", StabilityLevel: Stability,
			Help: "ResourceClaims unprepared, by result.",
		}, []string{"result"}),
		prepareLatency: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "prepare_duration_seconds", StabilityLevel: Stability,
			Help: "Duration of NodePrepareResources calls as seen by the plugin.", Buckets: buckets,
		}),
		unprepareLatency: metrics.NewHistogram(&metrics.HistogramOpts{
			Namespace: Namespace, Name: "unprepare_duration_seconds", StabilityLevel: Stability,
			Help: "Duration of NodeUnprepareResources calls as seen by the plugin.", Buckets: buckets,
		}),
		devices: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "devices", StabilityLevel: Stability,
			Help: "Published devices by mode (exclusive, shared) and state (free, prepared).",
		}, []string{"mode", "state"}),
		preparedClaims: metrics.NewGauge(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "prepared_claims", StabilityLevel: Stability,
			Help: "ResourceClaims in the checkpoint, whatever their phase.",
		}),
		publishes: metrics.NewCounter(&metrics.CounterOpts{
			Namespace: Namespace, Name: "publish_total", StabilityLevel: Stability,
			Help: "Times the plugin handed a changed set of devices to the ResourceSlice controller.",
		}),
		publishErrors: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "publish_errors_total", StabilityLevel: Stability,
			Help: "Errors while discovering, building or publishing ResourceSlices, by stage.",
		}, []string{"stage"}),
		checkpointErrors: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "checkpoint_errors_total", StabilityLevel: Stability,
			Help: "Checkpoint failures by operation (load, save, quarantine).",
		}, []string{"op"}),
		cleanupRemoved: metrics.NewCounterVec(&metrics.CounterOpts{
			Namespace: Namespace, Name: "cleanup_removed_total", StabilityLevel: Stability,
			Help: "Leftovers of deleted claims removed by the cleanup loop, by kind (entry, spec).",
		}, []string{"kind"}),
		model: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "device_model", StabilityLevel: Stability,
			Help: "1 for the device model this node publishes (partitionable or legacy).",
		}, []string{"model"}),
		buildInfo: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: Namespace, Name: "build_info", StabilityLevel: Stability,
			Help: "Always 1; the labels describe the build.",
		}, []string{"version", "git_commit", "go_version"}),
		healthMetrics:      newHealthMetrics(),
		statusMetrics:      newStatusMetrics(),
		networkMetrics:     newNetworkMetrics(),
		portCounterMetrics: newPortCounterMetrics(),
	}
	m.registry.MustRegister(m.registerables()...)
	m.registry.CustomMustRegister(m.portCounters)
	// client_golang's own collectors have no stability level; Kubernetes registers them
	// raw too (component-base's legacyregistry).
	m.registry.RawMustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	// A component-base vector measures only once registered: the series that exist from
	// the start, so that rate() and absent() work before the first event, are made now.
	m.buildInfo.WithLabelValues(version.Version, version.GitCommit, runtime.Version()).Set(1)
	for _, r := range []string{ResultSuccess, ResultError} {
		m.prepare.WithLabelValues(r)
		m.unprepare.WithLabelValues(r)
	}
	m.healthMetrics.makeSeries()
	m.statusMetrics.makeSeries()
	return m
}

// registerables lists every metric of the plugin but the port counter collector's
// families, the one list that NewPlugin registers.
func (m *Plugin) registerables() []metrics.Registerable {
	r := []metrics.Registerable{
		m.prepare, m.unprepare, m.prepareLatency, m.unprepareLatency, m.devices,
		m.preparedClaims, m.publishes, m.publishErrors, m.checkpointErrors, m.cleanupRemoved,
		m.model, m.buildInfo,
	}
	r = append(r, m.healthMetrics.registerables()...)
	r = append(r, m.statusMetrics.registerables()...)
	r = append(r, m.networkMetrics.registerables()...)
	return append(r, m.portCounterMetrics.registerables()...)
}

// Names returns the name of every metric the plugin serves but the Go and process
// collectors': the one list that the docs (TestDocMetricTables) and the Grafana
// dashboard (deployments, TestDashboardMetrics) are checked against.
func (m *Plugin) Names() []string {
	var names []string
	for _, r := range m.registerables() {
		names = append(names, r.FQName())
	}
	return append(names, m.portCounters.names()...)
}

// Registry returns the registry holding the metrics.
func (m *Plugin) Registry() metrics.KubeRegistry { return m.registry }

// Handler serves the metrics in the Prometheus exposition format; errors while
// gathering count in the registry's promhttp_metric_handler_errors_total.
func (m *Plugin) Handler() http.Handler {
	return metrics.HandlerFor(m.registry, metrics.HandlerOpts{Registry: m.registry.Registerer()})
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

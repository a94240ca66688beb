package controller

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/component-base/metrics"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/version"
	pluginmetrics "github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// metricsNamespace prefixes every metric, as in the kubelet plugin.
const metricsNamespace = pluginmetrics.Namespace

// Metrics are the controller's per-pool gauges, declared with
// k8s.io/component-base/metrics at the kubelet plugin's stability level, in a
// KubeRegistry of their own.
type Metrics struct {
	registry metrics.KubeRegistry
	gauges   map[string]*metrics.GaugeVec
	info     *metrics.GaugeVec
}

// The per-pool gauges, by name; each has the labels pool and mode.
const (
	metricNodes           = "pool_nodes"
	metricPorts           = "pool_ports"
	metricShares          = "pool_shares"
	metricAllocatedPorts  = "pool_allocated_ports"
	metricAllocatedShares = "pool_allocated_shares"
	metricFree            = "pool_free"
	metricReady           = "pool_ready"
)

var metricHelp = map[string]string{
	metricNodes:           "Nodes with at least one port of the pool (legacy pools: its device).",
	metricPorts:           "Ports the pool selects.",
	metricShares:          "Shares of the pool's ports (shared pools) or devices (legacy pools).",
	metricAllocatedPorts:  "Ports of the pool allocated to a claim, wholly or in part.",
	metricAllocatedShares: "Shares allocated to claims (shared and legacy pools).",
	metricFree:            "What can still be allocated: shares in a shared or legacy pool, ports in an exclusive pool.",
	metricReady:           "1 when the pool's DeviceClass matches its spec (condition Ready), else 0.",
}

// NewMetrics creates the gauges and registers them, with the Go and process
// collectors and the build info, in a new KubeRegistry.
func NewMetrics() *Metrics {
	m := &Metrics{
		registry: metrics.NewKubeRegistry(),
		gauges:   map[string]*metrics.GaugeVec{},
		info: metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: metricsNamespace, Name: "controller_build_info", StabilityLevel: pluginmetrics.Stability,
			Help: "Always 1; the labels say which build runs.",
		}, []string{"version"}),
	}
	for name, help := range metricHelp {
		m.gauges[name] = metrics.NewGaugeVec(&metrics.GaugeOpts{
			Namespace: metricsNamespace, Name: name, StabilityLevel: pluginmetrics.Stability, Help: help,
		}, []string{"pool", "mode"})
	}
	m.registry.MustRegister(m.registerables()...)
	// client_golang's own collectors have no stability level; Kubernetes registers them
	// raw too (component-base's legacyregistry).
	m.registry.RawMustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// A component-base vector measures only once registered.
	m.info.WithLabelValues(version.String()).Set(1)
	return m
}

// registerables lists every metric of the controller, the one list that NewMetrics
// registers and TestDocMetricTable checks docs/controller.md against.
func (m *Metrics) registerables() []metrics.Registerable {
	r := []metrics.Registerable{m.info}
	for _, g := range m.gauges {
		r = append(r, g)
	}
	return r
}

// Registry is where the metrics are registered; the leader election and workqueue
// metrics of client-go are not in it.
func (m *Metrics) Registry() metrics.KubeRegistry { return m.registry }

// Handler serves the registry in the Prometheus text format; errors while gathering
// count in the registry's promhttp_metric_handler_errors_total.
func (m *Metrics) Handler() http.Handler {
	return metrics.HandlerFor(m.registry, metrics.HandlerOpts{Registry: m.registry.Registerer()})
}

func (m *Metrics) set(pool *v1alpha1.RdmaPool, u Usage, ready bool) {
	if m == nil {
		return
	}
	// A pool's mode never changes (the CRD forbids it), so the old series need no
	// cleanup here.
	l := []string{pool.Name, string(pool.Spec.Mode)}
	readyValue := 0.0
	if ready {
		readyValue = 1
	}
	for name, v := range map[string]float64{
		metricNodes: float64(u.Nodes), metricPorts: float64(u.Ports), metricShares: float64(u.Shares),
		metricAllocatedPorts: float64(u.AllocatedPorts), metricAllocatedShares: float64(u.AllocatedShares),
		metricFree: float64(u.Free), metricReady: readyValue,
	} {
		m.gauges[name].WithLabelValues(l...).Set(v)
	}
}

// forget removes the series of a deleted pool.
func (m *Metrics) forget(pool string) {
	if m == nil {
		return
	}
	for _, g := range m.gauges {
		g.DeletePartialMatch(map[string]string{"pool": pool})
	}
}

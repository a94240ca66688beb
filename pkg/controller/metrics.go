package controller

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// metricsNamespace prefixes every metric, as in the kubelet plugin.
const metricsNamespace = "rdma_dra"

// Metrics are the controller's per-pool gauges, in a registry of their own.
type Metrics struct {
	registry *prometheus.Registry
	gauges   map[string]*prometheus.GaugeVec
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
	metricNodes:           "Nodes with at least one port of the pool.",
	metricPorts:           "Ports the pool selects.",
	metricShares:          "Shares of the pool's ports (shared pools).",
	metricAllocatedPorts:  "Ports of the pool allocated to a claim, wholly or in part.",
	metricAllocatedShares: "Shares of the pool's ports allocated to claims (shared pools).",
	metricFree:            "What can still be allocated: shares in a shared pool, ports in an exclusive pool.",
	metricReady:           "1 when the pool's DeviceClass matches its spec (condition Ready), else 0.",
}

// NewMetrics creates the gauges and registers them, with the Go and process
// collectors and the build info, in a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{registry: prometheus.NewRegistry(), gauges: map[string]*prometheus.GaugeVec{}}
	for name, help := range metricHelp {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: name, Help: help}, []string{"pool", "mode"})
		m.gauges[name] = g
		m.registry.MustRegister(g)
	}
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Name: "controller_build_info",
		Help: "Always 1; the labels say which build runs."}, []string{"version"})
	info.WithLabelValues(version.String()).Set(1)
	m.registry.MustRegister(info, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the metrics are registered; the leader election and workqueue
// metrics of client-go are not in it.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
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
		g.DeletePartialMatch(prometheus.Labels{"pool": pool})
	}
}

package controller

import (
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/metricsdoc"
)

// poolGauge returns the value of one pool's series of the gauge name.
func poolGauge(t *testing.T, m *Metrics, name, pool, mode string) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(m.gauges[name].WithLabelValues(pool, mode))
	if err != nil {
		t.Fatalf("read %s of pool %s: %v", name, pool, err)
	}
	return v
}

func TestMetrics(t *testing.T) {
	pool := func(name string, mode v1alpha1.PoolMode) *v1alpha1.RdmaPool {
		return &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RdmaPoolSpec{Mode: mode}}
	}
	tests := []struct {
		name   string
		update func(m *Metrics)
		want   string
	}{
		{
			name: "set",
			update: func(m *Metrics) {
				m.set(pool("ib", v1alpha1.PoolModeShared), Usage{Nodes: 2, Ports: 4, Shares: 64, AllocatedPorts: 1, AllocatedShares: 3, Free: 61}, true)
				m.set(pool("roce", v1alpha1.PoolModeExclusive), Usage{Nodes: 1, Ports: 2, AllocatedPorts: 2}, false)
			},
			want: `
# HELP rdma_dra_pool_free [ALPHA] What can still be allocated: shares in a shared or legacy pool, ports in an exclusive pool.
# TYPE rdma_dra_pool_free gauge
rdma_dra_pool_free{mode="exclusive",pool="roce"} 0
rdma_dra_pool_free{mode="shared",pool="ib"} 61
# HELP rdma_dra_pool_ports [ALPHA] Ports the pool selects.
# TYPE rdma_dra_pool_ports gauge
rdma_dra_pool_ports{mode="exclusive",pool="roce"} 2
rdma_dra_pool_ports{mode="shared",pool="ib"} 4
# HELP rdma_dra_pool_ready [ALPHA] 1 when the pool's DeviceClass matches its spec (condition Ready), else 0.
# TYPE rdma_dra_pool_ready gauge
rdma_dra_pool_ready{mode="exclusive",pool="roce"} 0
rdma_dra_pool_ready{mode="shared",pool="ib"} 1
`,
		},
		{
			name: "forget",
			update: func(m *Metrics) {
				m.set(pool("ib", v1alpha1.PoolModeShared), Usage{Ports: 4, Free: 61}, true)
				m.set(pool("roce", v1alpha1.PoolModeExclusive), Usage{Ports: 2, Free: 2}, true)
				m.forget("ib")
			},
			want: `
# HELP rdma_dra_pool_free [ALPHA] What can still be allocated: shares in a shared or legacy pool, ports in an exclusive pool.
# TYPE rdma_dra_pool_free gauge
rdma_dra_pool_free{mode="exclusive",pool="roce"} 2
# HELP rdma_dra_pool_ports [ALPHA] Ports the pool selects.
# TYPE rdma_dra_pool_ports gauge
rdma_dra_pool_ports{mode="exclusive",pool="roce"} 2
# HELP rdma_dra_pool_ready [ALPHA] 1 when the pool's DeviceClass matches its spec (condition Ready), else 0.
# TYPE rdma_dra_pool_ready gauge
rdma_dra_pool_ready{mode="exclusive",pool="roce"} 1
`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMetrics()
			tt.update(m)
			names := []string{"rdma_dra_pool_free", "rdma_dra_pool_ports", "rdma_dra_pool_ready"}
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(tt.want), names...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestMetricsHandler checks what a scraper gets: the build info, every pool gauge with
// its stability level in the help, and the Go collector.
func TestMetricsHandler(t *testing.T) {
	m := NewMetrics()
	m.set(&v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "ib"}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeShared}}, Usage{Shares: 8}, true)
	if got := poolGauge(t, m, metricShares, "ib", string(v1alpha1.PoolModeShared)); got != 8 {
		t.Errorf("shares %v, want 8", got)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	want := []string{"# HELP rdma_dra_controller_build_info [ALPHA] ", "rdma_dra_controller_build_info{version=", "go_goroutines"}
	for name := range metricHelp {
		want = append(want, "# HELP "+metricsNamespace+"_"+name+" [ALPHA] ")
	}
	for _, s := range want {
		if !strings.Contains(rec.Body.String(), s) {
			t.Errorf("/metrics lacks %q", s)
		}
	}
}

// TestDocMetricTable keeps docs/controller.md's metric table and the registered metrics
// one list: every metric with its type, stability level and labels.
func TestDocMetricTable(t *testing.T) {
	m := NewMetrics()
	// Every gauge gets a series, so that the registry shows its labels.
	m.set(&v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "ib"}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeShared}}, Usage{}, true)
	var names []string
	for _, r := range m.registerables() {
		names = append(names, r.FQName())
	}
	served, err := metricsdoc.Served(m.Registry(), names)
	if err != nil {
		t.Fatal(err)
	}
	const doc = "../../docs/controller.md"
	documented, err := metricsdoc.Documented(doc, metricsNamespace+"_")
	if err != nil {
		t.Fatal(err)
	}
	for _, err := range metricsdoc.Check(documented, served, true) {
		t.Errorf("%s: %v", doc, err)
	}
}

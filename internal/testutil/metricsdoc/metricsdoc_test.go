package metricsdoc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics"
)

func TestServed(t *testing.T) {
	reg := metrics.NewKubeRegistry()
	ops := metrics.NewCounterVec(&metrics.CounterOpts{Name: "x_ops_total", Help: "Ops.", StabilityLevel: metrics.BETA}, []string{"result", "op"})
	latency := metrics.NewHistogram(&metrics.HistogramOpts{Name: "x_latency_seconds", Help: "Latency."})
	idle := metrics.NewGaugeVec(&metrics.GaugeOpts{Name: "x_idle", Help: "Idle."}, []string{"pool"})
	reg.MustRegister(ops, latency, idle)
	ops.WithLabelValues("success", "get").Inc()
	latency.Observe(1)

	tests := []struct {
		name    string
		names   []string
		want    []Metric
		wantErr string
	}{
		{
			name:  "served",
			names: []string{"x_ops_total", "x_latency_seconds"},
			want: []Metric{
				{Name: "x_ops_total", Type: "counter", Stability: "BETA", Labels: []string{"op", "result"}},
				{Name: "x_latency_seconds", Type: "histogram", Stability: "ALPHA"},
			},
		},
		{name: "no series", names: []string{"x_idle"}, wantErr: "x_idle has no series"},
		{name: "unknown", names: []string{"x_gone"}, wantErr: "x_gone has no series"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Served(reg, tt.names)
			checkResult(t, "served", got, err, tt.want, tt.wantErr)
		})
	}
}

func TestDocumented(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    []Metric
		wantErr string
	}{
		{
			name: "rows",
			doc: "text `x_ops_total`\n\n| metric | type | stability | labels | meaning |\n|---|---|---|---|---|\n" +
				"| `x_ops_total` | counter | BETA | `result` (success, error), `op` | ops |\n" +
				"| `x_latency_seconds` | histogram | ALPHA | | latency of `get` |\n" +
				"| `y_other` | gauge | ALPHA | | another prefix |\n",
			want: []Metric{
				{Name: "x_ops_total", Type: "counter", Stability: "BETA", Labels: []string{"op", "result"}},
				{Name: "x_latency_seconds", Type: "histogram", Stability: "ALPHA"},
			},
		},
		{
			name:    "no stability column",
			doc:     "| `x_ops_total` | counter | `result` | ops |\n",
			wantErr: "4 columns",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "doc.md")
			if err := os.WriteFile(path, []byte(tt.doc), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := Documented(path, "x_")
			checkResult(t, "documented", got, err, tt.want, tt.wantErr)
		})
	}
}

func TestCheck(t *testing.T) {
	ops := Metric{Name: "x_ops_total", Type: "counter", Stability: "ALPHA", Labels: []string{"result"}}
	idle := Metric{Name: "x_idle", Type: "gauge", Stability: "ALPHA"}
	served := []Metric{ops, idle}
	with := func(f func(*Metric)) Metric {
		m := ops
		f(&m)
		return m
	}
	tests := []struct {
		name       string
		documented []Metric
		all        bool
		want       []string
	}{
		{name: "same", documented: []Metric{idle, ops}, all: true},
		{name: "subset", documented: []Metric{ops}},
		{name: "undocumented", documented: []Metric{ops}, all: true, want: []string{"x_idle gauge ALPHA [] is served but not documented"}},
		{name: "not served", documented: []Metric{ops, {Name: "x_gone"}}, want: []string{"x_gone is documented but not served"}},
		{name: "twice", documented: []Metric{ops, ops}, want: []string{"x_ops_total is documented twice"}},
		{name: "stability", documented: []Metric{with(func(m *Metric) { m.Stability = "STABLE" })}, want: []string{`documented "x_ops_total counter STABLE [result]", served "x_ops_total counter ALPHA [result]"`}},
		{name: "type", documented: []Metric{with(func(m *Metric) { m.Type = "gauge" })}, want: []string{`documented "x_ops_total gauge ALPHA [result]", served "x_ops_total counter ALPHA [result]"`}},
		{name: "labels", documented: []Metric{with(func(m *Metric) { m.Labels = nil })}, want: []string{`documented "x_ops_total counter ALPHA []", served "x_ops_total counter ALPHA [result]"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, err := range Check(tt.documented, served, tt.all) {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// checkResult checks a function's result against a table row: an error containing wantErr
// when that is set, else no error and want.
func checkResult[T any](t *testing.T, what string, got T, err error, want T, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("error %v, want one with %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", what, diff)
	}
}

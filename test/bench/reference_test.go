package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReferenceVersionIsPinned(t *testing.T) {
	v, err := referenceVersion(filepath.Join("reference", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if len(v) < 2 || v[0] != 'v' {
		t.Errorf("reference version %q, want a pinned vX.Y.Z", v)
	}
	sum, err := os.ReadFile(filepath.Join("reference", "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%s %s h1:", referenceModule, v); !containsLine(string(sum), want) {
		t.Errorf("reference/go.sum does not pin %s@%s (the build must not need the checksum database)", referenceModule, v)
	}
}

func containsLine(s, prefix string) bool {
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(line, prefix) {
			return true
		}
	}
	return false
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{5, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %g, want %g", tc.in, got, tc.want)
		}
	}
}

func TestScrapeMetric(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "# HELP x\nrdma_dra_claim_status_pending 3\n"+
			"rdma_dra_claim_status_updates_total{result=\"failed\"} 0\nrdma_dra_claim_status_updates_total{result=\"written\"} 12\n")
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	p := &Plugin{Opts: PluginOptions{MetricsAddress: l.Addr().String()}}
	for series, want := range map[string]float64{
		"rdma_dra_claim_status_pending":                         3,
		`rdma_dra_claim_status_updates_total{result="written"}`: 12,
		`rdma_dra_claim_status_updates_total{result="failed"}`:  0,
	} {
		got, err := scrapeMetric(context.Background(), p, series)
		if err != nil || got != want {
			t.Errorf("%s = %g, %v; want %g", series, got, err, want)
		}
	}
	if _, err := scrapeMetric(context.Background(), p, "rdma_dra_missing"); err == nil {
		t.Error("a missing series gave no error")
	}
}

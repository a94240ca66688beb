package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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

// TestWaitStatusDrained: a writer with nothing pending at the first look has no backlog;
// one that still has claims pending counts the time until a look finds none.
func TestWaitStatusDrained(t *testing.T) {
	tests := []struct {
		name     string
		pending  []int // what each scrape reports, the last one repeated
		wantZero bool
	}{
		{name: "nothing pending", pending: []int{0}, wantZero: true},
		{name: "a backlog", pending: []int{4, 2, 0}, wantZero: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var scrapes atomic.Int32
			srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				i := min(int(scrapes.Add(1))-1, len(tt.pending)-1)
				fmt.Fprintf(w, "rdma_dra_claim_status_pending %d\n", tt.pending[i])
			})}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { _ = srv.Close() })
			p := &Plugin{Opts: PluginOptions{MetricsAddress: l.Addr().String()}}
			d, err := waitStatusDrained(context.Background(), p, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if (d == 0) != tt.wantZero || int(scrapes.Load()) != len(tt.pending) {
				t.Errorf("drain %v after %d scrapes, want zero=%v after %d", d, scrapes.Load(), tt.wantZero, len(tt.pending))
			}
		})
	}
}

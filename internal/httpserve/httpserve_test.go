package httpserve

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

func get(t *testing.T, url string) (int, string, error) {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// TestMetricsServeAndStop serves plain /metrics (no authentication asked for), answers
// only that path, and stops serving when the context ends, returning nil.
func TestMetricsServeAndStop(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srv, err := Metrics(ctx, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("rdma_dra_up 1\n"))
	}), metricsauth.Config{}, cliflags.KubeClient{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	if srv.TLSConfig != nil || srv.ReadHeaderTimeout == 0 || srv.BaseContext == nil {
		t.Errorf("server: want plain HTTP with timeouts and the context's logger, got %+v", srv)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + lis.Addr().String()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "metrics", srv, lis) }()

	for _, tt := range []struct {
		path, body string
		code       int
	}{
		{MetricsPath, "rdma_dra_up 1\n", http.StatusOK},
		{"/healthz", "404 page not found\n", http.StatusNotFound},
	} {
		t.Run(tt.path, func(t *testing.T) {
			code, body, err := get(t, base+tt.path)
			if err != nil || code != tt.code || body != tt.body {
				t.Errorf("GET %s: %d %q %v, want %d %q", tt.path, code, body, err, tt.code, tt.body)
			}
		})
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after the context ended: %v, want nil", err)
		}
	case <-time.After(ShutdownTimeout + 5*time.Second):
		t.Fatal("Serve did not return after the context ended")
	}
	if _, _, err := get(t, base+MetricsPath); err == nil {
		t.Errorf("GET after the stop succeeded")
	}
}

// TestListenAndServeErrors: an address that cannot be listened on is an error that
// names the server and the address, returned at once.
func TestListenAndServeErrors(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = taken.Close() }()
	for _, tt := range []struct{ name, addr, want string }{
		{"address in use", taken.Addr().String(), "listen for probes on " + taken.Addr().String()},
		{"no such address", "256.0.0.1:0", "listen for probes on 256.0.0.1:0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			err := ListenAndServe(ctx, "probes", tt.addr, NewServer(ctx, http.NotFoundHandler()))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ListenAndServe: %v, want an error with %q", err, tt.want)
			}
		})
	}
}

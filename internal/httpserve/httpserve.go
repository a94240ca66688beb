// Package httpserve serves the binaries' small HTTP endpoints (metrics, health and
// readiness probes, the webhook): one set of timeouts, a graceful stop when the context
// ends, and /metrics with or without authentication (pkg/metricsauth).
package httpserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

// ShutdownTimeout is how long requests in flight get to finish when the context ends.
const ShutdownTimeout = 5 * time.Second

// MetricsPath is where Metrics serves.
const MetricsPath = "/metrics"

// NewServer returns a server of handler with timeouts, so that a slow or idle client
// cannot hold connections open; requests log through ctx's logger.
func NewServer(ctx context.Context, handler http.Handler) *http.Server {
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       90 * time.Second,
		MaxHeaderBytes:    16 << 10,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// Serve serves srv on lis until ctx ends, over TLS when srv.TLSConfig is set, and then
// shuts it down, giving requests in flight ShutdownTimeout. It returns nil when ctx
// ended it, the error otherwise; name says what is served, in the log and the error.
func Serve(ctx context.Context, name string, srv *http.Server, lis net.Listener) error {
	addr := lis.Addr().String()
	stopped := make(chan struct{})
	defer close(stopped)
	go func() {
		select {
		case <-ctx.Done():
		case <-stopped:
			return
		}
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), ShutdownTimeout)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	klog.FromContext(ctx).Info("Serving", "server", name, "address", addr, "tls", srv.TLSConfig != nil)
	var err error
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(lis, "", "")
	} else {
		err = srv.Serve(lis)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return fmt.Errorf("serve %s on %s: %w", name, addr, err)
	}
	return nil
}

// ListenAndServe listens on the TCP address addr and serves srv there (see Serve).
func ListenAndServe(ctx context.Context, name, addr string, srv *http.Server) error {
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("listen for %s on %s: %w", name, addr, err)
	}
	return Serve(ctx, name, srv, lis)
}

// Metrics returns a server of handler at MetricsPath: plain HTTP, or with auth.Secure
// HTTPS where every request needs a bearer token that is allowed to get the path. The
// token and access reviews go through a client of their own (kube's identity with
// metricsauth's rate limit): made-up tokens must not delay the binary's own requests.
func Metrics(ctx context.Context, handler http.Handler, auth metricsauth.Config, kube cliflags.KubeClient, component string) (*http.Server, error) {
	var tlsConfig *tls.Config
	if auth.Secure {
		client, err := kube.WithRateLimit(metricsauth.ClientQPS, metricsauth.ClientBurst).Clientset(component)
		if err != nil {
			return nil, fmt.Errorf("create metrics review client: %w", err)
		}
		if handler, tlsConfig, err = auth.Protect(ctx, client, handler); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle(MetricsPath, handler)
	srv := NewServer(ctx, mux)
	srv.TLSConfig = tlsConfig
	return srv, nil
}

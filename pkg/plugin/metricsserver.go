package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

// serveMetrics serves handler at /metrics on cfg.MetricsAddress until ctx ends: plain
// HTTP, or with cfg.MetricsAuth.Secure HTTPS where every request needs a bearer token
// that is allowed to get /metrics (pkg/metricsauth), which makes listening on every
// address of the node safe.
func serveMetrics(ctx context.Context, cfg Config, handler http.Handler) error {
	logger := klog.FromContext(ctx)
	srv := &http.Server{Addr: cfg.MetricsAddress, ReadHeaderTimeout: 10 * time.Second,
		// Requests log through the plugin's logger.
		BaseContext: func(net.Listener) context.Context { return ctx }}
	if cfg.MetricsAuth.Secure {
		// The reviews get a client and a rate limit of their own (metricsauth.ClientQPS):
		// made-up tokens must not delay the helper's requests for prepare.
		client, err := newKubeClient(cfg.Kubeconfig, metricsauth.ClientQPS, metricsauth.ClientBurst)
		if err != nil {
			return fmt.Errorf("serve metrics: %w", err)
		}
		if handler, srv.TLSConfig, err = cfg.MetricsAuth.Protect(ctx, client, handler); err != nil {
			return fmt.Errorf("serve metrics: %w", err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv.Handler = mux
	go func() {
		<-ctx.Done()
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdownCtx)
	}()
	lis, err := listenShared(ctx, cfg.MetricsAddress)
	if err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	logger.Info("Serving metrics", "address", cfg.MetricsAddress, "secure", cfg.MetricsAuth.Secure)
	if srv.TLSConfig != nil {
		err = srv.ServeTLS(lis, "", "")
	} else {
		err = srv.Serve(lis)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return nil
}

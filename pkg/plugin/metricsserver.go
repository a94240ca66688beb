package plugin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rdma-dra/rdma-dra-driver/internal/httpserve"
)

// serveMetrics serves handler at /metrics on cfg.MetricsAddress until ctx ends: plain
// HTTP, or with cfg.MetricsAuth.Secure HTTPS where every request needs a bearer token
// that is allowed to get /metrics (pkg/metricsauth), which makes listening on every
// address of the node safe.
func serveMetrics(ctx context.Context, cfg Config, handler http.Handler) error {
	srv, err := httpserve.Metrics(ctx, handler, cfg.MetricsAuth, cfg.KubeClient, Component)
	if err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	lis, err := listenShared(ctx, cfg.MetricsAddress)
	if err != nil {
		return fmt.Errorf("serve metrics: %w", err)
	}
	return httpserve.Serve(ctx, "metrics", srv, lis)
}

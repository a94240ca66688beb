package plugin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// RegistrationReporter reports the kubelet's answer to the plugin's registration;
// *kubeletplugin.Helper implements it.
type RegistrationReporter interface {
	RegistrationStatus() *registerapi.RegistrationStatus
}

// livenessPoll is how often the registration status is copied into the health server.
const livenessPoll = 2 * time.Second

// ServeLiveness serves the gRPC health protocol on address until ctx ends. The overall
// service ("") is SERVING once the kubelet accepted the plugin's registration and
// NOT_SERVING before or when it refused it, so that a liveness probe restarts a plugin
// the kubelet does not talk to.
func ServeLiveness(ctx context.Context, address string, reg RegistrationReporter) error {
	lis, err := listenShared(ctx, address)
	if err != nil {
		return fmt.Errorf("listen for health checks: %w", err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go func() {
		ticker := time.NewTicker(livenessPoll)
		defer ticker.Stop()
		last := healthpb.HealthCheckResponse_NOT_SERVING
		for {
			status := healthpb.HealthCheckResponse_NOT_SERVING
			if s := reg.RegistrationStatus(); s != nil && s.PluginRegistered {
				status = healthpb.HealthCheckResponse_SERVING
			}
			if status != last {
				klog.FromContext(ctx).Info("Liveness changed", "status", status.String())
				last = status
			}
			hs.SetServingStatus("", status)
			select {
			case <-ctx.Done():
				hs.Shutdown()
				srv.Stop()
				return
			case <-ticker.C:
			}
		}
	}()
	klog.FromContext(ctx).Info("Serving gRPC health checks", "address", lis.Addr().String())
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		return fmt.Errorf("serve health checks: %w", err)
	}
	return nil
}

package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/klog/v2"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// RegistrationReporter reports the kubelet's answer to the plugin's registration;
// *kubeletplugin.Helper implements it.
type RegistrationReporter interface {
	RegistrationStatus() *registerapi.RegistrationStatus
}

// ServeLiveness serves GET /healthz on address until ctx ends: 200 once the kubelet
// accepted the plugin's registration, 503 before or when it refused it, so that a
// liveness probe restarts a plugin the kubelet does not talk to. It is plain HTTP so
// that the probe can name a host: the plugin runs on the host network, and the chart
// binds the port to 127.0.0.1, where the kubelet (in the host's network namespace)
// reaches it and other pods of the cluster do not.
func ServeLiveness(ctx context.Context, address string, reg RegistrationReporter) error {
	lis, err := listenShared(ctx, address)
	if err != nil {
		return fmt.Errorf("listen for health checks: %w", err)
	}
	srv := &http.Server{
		Handler:           livenessHandler(reg),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       5 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       30 * time.Second,
		MaxHeaderBytes:    8 << 10,
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	klog.FromContext(ctx).Info("Serving health checks", "address", lis.Addr().String(), "path", LivenessPath)
	if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) && ctx.Err() == nil {
		return fmt.Errorf("serve health checks: %w", err)
	}
	return nil
}

// LivenessPath is the liveness endpoint's path.
const LivenessPath = "/healthz"

// livenessHandler answers LivenessPath from the registration status.
func livenessHandler(reg RegistrationReporter) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+LivenessPath, func(w http.ResponseWriter, _ *http.Request) {
		if s := reg.RegistrationStatus(); s == nil || !s.PluginRegistered {
			http.Error(w, "not registered with the kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	return mux
}

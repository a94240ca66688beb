package plugin

import (
	"context"
	"fmt"
	"net/http"

	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/rdma-dra/rdma-dra-driver/internal/httpserve"
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
	return httpserve.Serve(ctx, "health checks", httpserve.NewServer(ctx, livenessHandler(reg)), lis)
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

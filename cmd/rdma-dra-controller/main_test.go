package main

import (
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

func TestCheck(t *testing.T) {
	valid := controller.Config{Namespace: "ns", Identity: "pod-0", LeaderElect: true, Workers: 2,
		KubeClient: cliflags.KubeClient{QPS: controller.DefaultKubeAPIQPS, Burst: controller.DefaultKubeAPIBurst},
		Webhook:    controller.WebhookConfig{Address: ":9443", CertSource: controller.CertSelfManaged, SecretName: "s", ServiceName: "svc", ConfigName: "cfg"}}
	tests := []struct {
		name   string
		mutate func(*controller.Config)
		want   string
	}{
		{"valid", func(*controller.Config) {}, ""},
		{"no namespace", func(c *controller.Config) { c.Namespace = "" }, "--namespace is required"},
		{"no workers", func(c *controller.Config) { c.Workers = 0 }, "--workers must be at least 1"},
		{"zero QPS", func(c *controller.Config) { c.KubeClient.QPS = 0 }, "--kube-api-qps must be positive, got 0"},
		{"zero burst", func(c *controller.Config) { c.KubeClient.Burst = 0 }, "--kube-api-burst must be at least 1, got 0"},
		{"files without dir", func(c *controller.Config) { c.Webhook.CertSource = controller.CertFiles }, "--webhook-cert-dir is required"},
		{"self-managed without names", func(c *controller.Config) { c.Webhook.SecretName = "" }, "--webhook-secret, --webhook-service and --webhook-config are required"},
		{"unknown source", func(c *controller.Config) { c.Webhook.CertSource = "vault" }, `--webhook-cert-source must be self-managed or files, got "vault"`},
		{"webhook off needs nothing", func(c *controller.Config) { c.Webhook = controller.WebhookConfig{} }, ""},
		{"secure metrics, self-signed", func(c *controller.Config) { c.MetricsAuth.Secure = true }, ""},
		{"secure metrics with files", func(c *controller.Config) {
			c.MetricsAuth = metricsauth.Config{Secure: true, CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key"}
		}, ""},
		{"metrics cert without key", func(c *controller.Config) {
			c.MetricsAuth = metricsauth.Config{Secure: true, CertFile: "/tls/tls.crt"}
		}, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"metrics key without cert", func(c *controller.Config) {
			c.MetricsAuth = metricsauth.Config{Secure: true, KeyFile: "/tls/tls.key"}
		}, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"metrics files without secure", func(c *controller.Config) {
			c.MetricsAuth = metricsauth.Config{CertFile: "/tls/tls.crt", KeyFile: "/tls/tls.key"}
		}, "need --metrics-secure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := valid
			tt.mutate(&cfg)
			err := check(&cfg)
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("check: %v, want %q", err, tt.want)
			}
		})
	}
}

// TestEveryFlagHasAnEnvTwin keeps the project's rule for this binary.
func TestEveryFlagHasAnEnvTwin(t *testing.T) {
	for _, f := range newApp().Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); !ok || len(ev.GetEnvVars()) == 0 {
			t.Errorf("flag %v has no environment variable", f.Names())
		}
	}
}

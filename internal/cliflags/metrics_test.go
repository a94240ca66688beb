package cliflags

import (
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

// TestMetricsAuthFlags runs the flags through the parser and the validation: the TLS
// files of /metrics come as a pair and only with --metrics-secure, from flags or their
// environment twins.
func TestMetricsAuthFlags(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantSecure bool
		want       string
	}{
		{"plain", nil, nil, false, ""},
		{"secure", []string{"--metrics-secure"}, nil, true, ""},
		{"secure from env", nil, map[string]string{"METRICS_SECURE": "true", "METRICS_TLS_CERT_FILE": "/tls/tls.crt", "METRICS_TLS_KEY_FILE": "/tls/tls.key"}, true, ""},
		{"cert without key", []string{"--metrics-secure", "--metrics-tls-cert-file=/tls/tls.crt"}, nil, true, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"key without cert", nil, map[string]string{"METRICS_SECURE": "true", "METRICS_TLS_KEY_FILE": "/tls/tls.key"}, true, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"files without secure", []string{"--metrics-tls-cert-file=/tls/tls.crt", "--metrics-tls-key-file=/tls/tls.key"}, nil, false, "need --metrics-secure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var cfg metricsauth.Config
			app := &cli.App{Flags: MetricsAuthFlags(&cfg, "the service account"), Action: func(*cli.Context) error {
				if cfg.Secure != tt.wantSecure {
					t.Errorf("Secure %v, want %v", cfg.Secure, tt.wantSecure)
				}
				return cfg.Validate()
			}}
			err := app.Run(append([]string{"bin"}, tt.args...))
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("run: %v, want %q", err, tt.want)
			}
		})
	}
}

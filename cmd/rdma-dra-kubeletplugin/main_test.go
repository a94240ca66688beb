package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// TestMetricsFlags runs the flags through the parser and the plugin's validation: the
// TLS files of /metrics come as a pair and only with --metrics-secure, from flags or
// their environment twins.
func TestMetricsFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"plain", nil, nil, ""},
		{"secure", []string{"--metrics-secure"}, nil, ""},
		{"secure from env", nil, map[string]string{"METRICS_SECURE": "true", "METRICS_TLS_CERT_FILE": "/tls/tls.crt", "METRICS_TLS_KEY_FILE": "/tls/tls.key"}, ""},
		{"cert without key", []string{"--metrics-secure", "--metrics-tls-cert-file=/tls/tls.crt"}, nil, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"key without cert", nil, map[string]string{"METRICS_SECURE": "true", "METRICS_TLS_KEY_FILE": "/tls/tls.key"}, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"files without secure", []string{"--metrics-tls-cert-file=/tls/tls.crt", "--metrics-tls-key-file=/tls/tls.key"}, nil, "need --metrics-secure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			v := &flagValues{}
			app := &cli.App{Flags: v.flags(), Action: func(*cli.Context) error {
				cfg, err := v.config()
				if err != nil {
					return err
				}
				if want := slices.Contains(tt.args, "--metrics-secure") || tt.env["METRICS_SECURE"] == "true"; cfg.MetricsAuth.Secure != want {
					t.Errorf("MetricsAuth %+v, want Secure %v", cfg.MetricsAuth, want)
				}
				return cfg.Validate()
			}}
			err := app.Run(append([]string{"rdma-dra-kubeletplugin", "--node-name=node-1"}, tt.args...))
			if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("run: %v, want %q", err, tt.want)
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

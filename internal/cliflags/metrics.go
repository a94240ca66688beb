package cliflags

import (
	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
)

// MetricsAuthFlags are the flags of cfg, the same in every binary that serves /metrics:
// --metrics-secure, --metrics-tls-cert-file and --metrics-tls-key-file, with their
// environment twins. account names the binary's service account in the help.
func MetricsAuthFlags(cfg *metricsauth.Config, account string) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "metrics-secure", Usage: "serve /metrics over HTTPS and require a bearer token allowed to get it (TokenReview and SubjectAccessReview; " + account + " needs system:auth-delegator)", EnvVars: []string{"METRICS_SECURE"}, Destination: &cfg.Secure},
		&cli.StringFlag{Name: "metrics-tls-cert-file", Usage: "serving certificate of /metrics with --metrics-secure, re-read when it changes; empty with --metrics-tls-key-file: a self-signed one", EnvVars: []string{"METRICS_TLS_CERT_FILE"}, Destination: &cfg.CertFile, TakesFile: true},
		&cli.StringFlag{Name: "metrics-tls-key-file", Usage: "key of --metrics-tls-cert-file", EnvVars: []string{"METRICS_TLS_KEY_FILE"}, Destination: &cfg.KeyFile, TakesFile: true},
	}
}

// Command rdma-dra-controller is the driver's cluster-wide controller: RdmaPools become
// DeviceClasses, pool status reports usage, and the admission webhook validates
// RdmaConfig parameters before they are stored.
package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	cfg := &controller.Config{}
	app := cliflags.NewApp(controller.Component,
		"turn RdmaPools into DeviceClasses, report pool usage and validate RdmaConfig parameters", flags(cfg))
	app.Action = func(c *cli.Context) error {
		if err := check(cfg); err != nil {
			return err
		}
		return controller.Run(c.Context, *cfg)
	}
	return app
}

func flags(cfg *controller.Config) []cli.Flag {
	w := &cfg.Webhook
	flags := cfg.KubeClient.Flags(cliflags.KubeClient{QPS: controller.DefaultKubeAPIQPS, Burst: controller.DefaultKubeAPIBurst})
	flags = append(flags, []cli.Flag{
		&cli.StringFlag{Name: "driver-name", Usage: "the DRA driver name the DeviceClasses select", Value: devicemodel.DefaultDriverName, EnvVars: []string{"DRIVER_NAME"}, Destination: &cfg.DriverName},
		&cli.StringFlag{Name: "namespace", Usage: "namespace of the Lease and the webhook certificate Secret (required)", EnvVars: []string{"POD_NAMESPACE"}, Destination: &cfg.Namespace},
		&cli.StringFlag{Name: "identity", Usage: "this replica's name in the Lease; default the host name", EnvVars: []string{"POD_NAME"}, Destination: &cfg.Identity},
		&cli.BoolFlag{Name: "leader-elect", Usage: "elect one active replica through a Lease", Value: true, EnvVars: []string{"LEADER_ELECT"}, Destination: &cfg.LeaderElect},
		&cli.StringFlag{Name: "lease-name", Usage: "the Lease of the leader election", Value: "rdma-dra-controller", EnvVars: []string{"LEASE_NAME"}, Destination: &cfg.LeaseName},
		&cli.DurationFlag{Name: "lease-duration", Usage: "how long a lease is valid", Value: 15 * time.Second, EnvVars: []string{"LEASE_DURATION"}, Destination: &cfg.LeaseDuration},
		&cli.DurationFlag{Name: "renew-deadline", Usage: "how long the leader tries to renew before giving up", Value: 10 * time.Second, EnvVars: []string{"RENEW_DEADLINE"}, Destination: &cfg.RenewDeadline},
		&cli.DurationFlag{Name: "retry-period", Usage: "how often candidates try to acquire the lease", Value: 2 * time.Second, EnvVars: []string{"RETRY_PERIOD"}, Destination: &cfg.RetryPeriod},
		&cli.IntFlag{Name: "workers", Usage: "pools synced at once", Value: 2, EnvVars: []string{"WORKERS"}, Destination: &cfg.Workers},
		&cli.StringFlag{Name: "metrics-bind-address", Usage: "listen address of /metrics, which has no authentication without --metrics-secure: the default is this pod only; :8080 lets Prometheus scrape (restrict it with a NetworkPolicy or --metrics-secure); empty disables", Value: "127.0.0.1:8080", EnvVars: []string{"METRICS_BIND_ADDRESS"}, Destination: &cfg.MetricsAddress},
		&cli.StringFlag{Name: "health-probe-bind-address", Usage: "listen address of /healthz and /readyz for the kubelet's probes; empty disables", Value: ":8081", EnvVars: []string{"HEALTH_PROBE_BIND_ADDRESS"}, Destination: &cfg.ProbeAddress},
		&cli.StringFlag{Name: "webhook-address", Usage: "TLS listen address of the admission webhook; empty disables", EnvVars: []string{"WEBHOOK_ADDRESS"}, Destination: &w.Address},
		&cli.StringFlag{Name: "webhook-cert-source", Usage: "self-managed (a CA and certificate in --webhook-secret) or files (tls.crt and tls.key in --webhook-cert-dir, e.g. from cert-manager)", Value: controller.CertSelfManaged, EnvVars: []string{"WEBHOOK_CERT_SOURCE"}, Destination: &w.CertSource},
		&cli.StringFlag{Name: "webhook-cert-dir", Usage: "directory of tls.crt and tls.key for --webhook-cert-source=files", EnvVars: []string{"WEBHOOK_CERT_DIR"}, Destination: &w.CertDir, TakesFile: true},
		&cli.StringFlag{Name: "webhook-secret", Usage: "Secret (in --namespace, created by the chart) that holds the self-managed certificate", EnvVars: []string{"WEBHOOK_SECRET"}, Destination: &w.SecretName},
		&cli.StringFlag{Name: "webhook-service", Usage: "Service of the webhook; the certificate is valid for its DNS names", EnvVars: []string{"WEBHOOK_SERVICE"}, Destination: &w.ServiceName},
		&cli.StringFlag{Name: "webhook-config", Usage: "ValidatingWebhookConfiguration whose caBundle the controller keeps", EnvVars: []string{"WEBHOOK_CONFIG"}, Destination: &w.ConfigName},
	}...)
	return append(flags, cliflags.MetricsAuthFlags(&cfg.MetricsAuth, "the controller's service account")...)
}

// check refuses combinations that would fail later and less clearly.
func check(cfg *controller.Config) error {
	var errs []error
	if cfg.Namespace == "" && (cfg.LeaderElect || cfg.Webhook.Address != "") {
		errs = append(errs, errors.New("--namespace is required for leader election and the webhook"))
	}
	if cfg.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			errs = append(errs, fmt.Errorf("--identity: %w", err))
		}
		cfg.Identity = host
	}
	if cfg.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", cfg.Workers))
	}
	if err := cfg.KubeClient.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := cfg.MetricsAuth.Validate(); err != nil {
		errs = append(errs, err)
	}
	w := cfg.Webhook
	if w.Address != "" {
		switch w.CertSource {
		case controller.CertFiles:
			if w.CertDir == "" {
				errs = append(errs, errors.New("--webhook-cert-dir is required with --webhook-cert-source=files"))
			}
		case controller.CertSelfManaged:
			if w.SecretName == "" || w.ServiceName == "" || w.ConfigName == "" {
				errs = append(errs, errors.New("--webhook-secret, --webhook-service and --webhook-config are required with --webhook-cert-source=self-managed"))
			}
		default:
			errs = append(errs, fmt.Errorf("--webhook-cert-source must be %s or %s, got %q", controller.CertSelfManaged, controller.CertFiles, w.CertSource))
		}
	}
	return errors.Join(errs...)
}

// Command rdma-dra-controller is the driver's cluster-wide controller: RdmaPools become
// DeviceClasses, pool status reports usage, and the admission webhook validates
// RdmaConfig parameters before they are stored.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
)

func main() {
	cliflags.Main(newApp())
}

func newApp() *cli.App {
	cfg := &controller.Config{}
	app := cliflags.NewApp(controller.Component,
		"turn RdmaPools into DeviceClasses, report pool usage and validate RdmaConfig parameters", controller.Flags(cfg))
	app.Action = func(c *cli.Context) error {
		if err := check(cfg); err != nil {
			return err
		}
		return controller.Run(c.Context, *cfg)
	}
	return app
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

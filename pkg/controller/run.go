package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/httpserve"
	"github.com/rdma-dra/rdma-dra-driver/pkg/certfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
	"github.com/rdma-dra/rdma-dra-driver/pkg/webhook"
)

// Certificate sources of the webhook.
const (
	// CertSelfManaged: the controller keeps a CA and certificate in a Secret.
	CertSelfManaged = "self-managed"
	// CertFiles: the certificate is read from files (cert-manager mounts them).
	CertFiles = "files"
)

// Component names the controller in its user agent.
const Component = "rdma-dra-controller"

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the controller's client-side rate limit,
// client-go's defaults: it reads through informers and writes a DeviceClass or a pool's
// status now and then.
const (
	DefaultKubeAPIQPS   = 5
	DefaultKubeAPIBurst = 10
)

// Config is what Run needs; cmd/rdma-dra-controller fills it from flags.
type Config struct {
	// KubeClient is the API client's kubeconfig and rate limit.
	KubeClient cliflags.KubeClient
	// DriverName is the DRA driver's name.
	DriverName string
	// Namespace is where the Lease and the certificate Secret are.
	Namespace string
	// Identity names this replica in the Lease; the pod name.
	Identity string
	// LeaderElect turns leader election on; off runs the controller at once (one
	// replica only, or tests).
	LeaderElect bool
	// LeaseName is the Lease of the leader election.
	LeaseName string
	// LeaseDuration, RenewDeadline and RetryPeriod tune the leader election.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers is how many pools are synced at once.
	Workers int
	// MetricsAddress serves /metrics; empty disables. The default
	// (cmd/rdma-dra-controller) is 127.0.0.1: scraping is an opt-in.
	MetricsAddress string
	// MetricsAuth serves /metrics over HTTPS with authentication and authorization;
	// the zero value is plain HTTP without.
	MetricsAuth metricsauth.Config
	// ProbeAddress serves /healthz and /readyz for the kubelet's probes; empty disables.
	ProbeAddress string
	// Webhook configures the admission webhook; an empty Address disables it.
	Webhook WebhookConfig
}

// WebhookConfig configures the admission webhook server.
type WebhookConfig struct {
	// Address is the TLS listen address, e.g. :9443.
	Address string
	// CertSource is CertSelfManaged or CertFiles.
	CertSource string
	// CertDir holds tls.crt and tls.key for CertFiles.
	CertDir string
	// SecretName, ServiceName and ConfigName are for CertSelfManaged.
	SecretName, ServiceName, ConfigName string
}

// Flags declares the controller's flags, each with its environment twin, bound to the
// fields of cfg; cliflags.NewApp adds the logging flags. The chart's environment is
// checked against them (deployments).
func Flags(cfg *Config) []cli.Flag {
	w := &cfg.Webhook
	flags := cfg.KubeClient.Flags(cliflags.KubeClient{QPS: DefaultKubeAPIQPS, Burst: DefaultKubeAPIBurst})
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
		&cli.StringFlag{Name: "webhook-cert-source", Usage: "self-managed (a CA and certificate in --webhook-secret) or files (tls.crt and tls.key in --webhook-cert-dir, e.g. from cert-manager)", Value: CertSelfManaged, EnvVars: []string{"WEBHOOK_CERT_SOURCE"}, Destination: &w.CertSource},
		&cli.StringFlag{Name: "webhook-cert-dir", Usage: "directory of tls.crt and tls.key for --webhook-cert-source=files", EnvVars: []string{"WEBHOOK_CERT_DIR"}, Destination: &w.CertDir, TakesFile: true},
		&cli.StringFlag{Name: "webhook-secret", Usage: "Secret (in --namespace, created by the chart) that holds the self-managed certificate", EnvVars: []string{"WEBHOOK_SECRET"}, Destination: &w.SecretName},
		&cli.StringFlag{Name: "webhook-service", Usage: "Service of the webhook; the certificate is valid for its DNS names", EnvVars: []string{"WEBHOOK_SERVICE"}, Destination: &w.ServiceName},
		&cli.StringFlag{Name: "webhook-config", Usage: "ValidatingWebhookConfiguration whose caBundle the controller keeps", EnvVars: []string{"WEBHOOK_CONFIG"}, Destination: &w.ConfigName},
	}...)
	return append(flags, cliflags.MetricsAuthFlags(&cfg.MetricsAuth, "the controller's service account")...)
}

// Run runs the controller (under leader election) and the webhook (on every replica)
// until ctx ends or leadership is lost.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	restCfg, err := cfg.KubeClient.RESTConfig(Component)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	rdma, err := versioned.NewForConfig(restCfg)
	if err != nil {
		return fmt.Errorf("create RdmaPool client: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	metrics := NewMetrics()
	var webhookReady atomic.Bool
	var electionHealth *leaderelection.HealthzAdaptor
	if cfg.LeaderElect {
		electionHealth = leaderelection.NewLeaderHealthzAdaptor(20 * time.Second)
	}
	if cfg.MetricsAddress != "" {
		srv, err := httpserve.Metrics(ctx, metrics.Handler(), cfg.MetricsAuth, cfg.KubeClient, Component)
		if err != nil {
			return err
		}
		go serve(ctx, cancel, "metrics", cfg.MetricsAddress, srv)
	}
	if cfg.ProbeAddress != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
			if electionHealth != nil {
				if err := electionHealth.Check(r); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
			}
			_, _ = w.Write([]byte("ok"))
		})
		// Ready means the webhook can answer: every replica serves it, leader or not.
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if cfg.Webhook.Address != "" && !webhookReady.Load() {
				http.Error(w, "webhook certificate not loaded", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
		go serve(ctx, cancel, "probes", cfg.ProbeAddress, httpserve.NewServer(ctx, mux))
	}
	if cfg.Webhook.Address != "" {
		if err := startWebhook(ctx, cancel, kube, cfg, &webhookReady); err != nil {
			return err
		}
	}

	c := New(cfg.DriverName, kube, rdma, metrics)
	run := func(ctx context.Context) {
		if err := c.Run(ctx, cfg.Workers); err != nil {
			cancel(err)
		}
	}
	if !cfg.LeaderElect {
		run(ctx)
		return context.Cause(ctx)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.LeaseName,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: cfg.Identity})
	if err != nil {
		return fmt.Errorf("create lease lock: %w", err)
	}
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, ReleaseOnCancel: true, Name: cfg.LeaseName,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		WatchDog: electionHealth,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) {
				logger.Info("Became leader", "lease", cfg.LeaseName)
				run(ctx)
			},
			OnStoppedLeading: func() {
				// A replica that lost its lease may have stale caches and queues:
				// exiting is the simplest way to start clean.
				cancel(errors.New("lost leadership"))
			},
		},
	})
	if err != nil {
		return fmt.Errorf("configure leader election: %w", err)
	}
	elector.Run(ctx)
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	return nil
}

// startWebhook sets up the certificate and serves the webhook over TLS.
func startWebhook(ctx context.Context, cancel context.CancelCauseFunc, kube kubernetes.Interface, cfg Config, ready *atomic.Bool) error {
	w := cfg.Webhook
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	switch w.CertSource {
	case CertFiles:
		f := &certfile.Reloader{CertFile: w.CertDir + "/tls.crt", KeyFile: w.CertDir + "/tls.key"}
		getCert = f.GetCertificate
		go func() {
			// Ready once cert-manager has written the files.
			for ctx.Err() == nil && !ready.Load() {
				if _, err := f.GetCertificate(nil); err == nil {
					ready.Store(true)
					return
				}
				time.Sleep(2 * time.Second)
			}
		}()
	case CertSelfManaged:
		m := &webhook.CertManager{Client: kube, Namespace: cfg.Namespace, SecretName: w.SecretName,
			ServiceName: w.ServiceName, WebhookConfigName: w.ConfigName}
		getCert = m.GetCertificate
		go keepCertificate(ctx, m, ready)
	default:
		return fmt.Errorf("webhook certificate source %q: want %s or %s", w.CertSource, CertSelfManaged, CertFiles)
	}
	// Every replica serves the webhook, leader or not, so it keeps its own cache of
	// DeviceClasses for the admin limits of their configs.
	factory := informers.NewSharedInformerFactory(kube, 0)
	classes := factory.Resource().V1().DeviceClasses().Lister()
	factory.Start(ctx.Done())
	v := &webhook.Validator{
		DriverName: cfg.DriverName,
		ValidatePool: func(p *v1alpha1.RdmaPool) field.ErrorList {
			return ValidatePoolCEL(cfg.DriverName, p)
		},
		Class: classes.Get,
	}
	srv := webhook.NewServer(ctx, w.Address, v, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert})
	go serve(ctx, cancel, "webhook", w.Address, srv)
	return nil
}

// keepCertificate ensures the self-managed certificate now and every hour after, and
// retries quickly while it fails (the Secret may not be there yet during an install).
func keepCertificate(ctx context.Context, m *webhook.CertManager, ready *atomic.Bool) {
	logger := klog.FromContext(ctx)
	for {
		wait := time.Hour
		if err := m.Ensure(ctx); err != nil {
			logger.Error(err, "Webhook certificate not ready, retrying")
			wait = 5 * time.Second
		} else {
			ready.Store(true)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// serve serves srv on addr until ctx ends; a server that cannot start ends the process.
func serve(ctx context.Context, cancel context.CancelCauseFunc, name, addr string, srv *http.Server) {
	if err := httpserve.ListenAndServe(ctx, name, addr, srv); err != nil {
		cancel(err)
	}
}

package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/certfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned"
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

// Config is what Run needs; cmd/rdma-dra-controller fills it from flags.
type Config struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
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

// Run runs the controller (under leader election) and the webhook (on every replica)
// until ctx ends or leadership is lost.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	restCfg, err := restConfig(cfg.Kubeconfig)
	if err != nil {
		return err
	}
	restCfg.UserAgent = "rdma-dra-controller"
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
		srv, err := metricsServer(ctx, cfg, restCfg, metrics)
		if err != nil {
			return err
		}
		go serve(ctx, cancel, "metrics", srv, srv.TLSConfig != nil)
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
		go serve(ctx, cancel, "probes", newHTTPServer(cfg.ProbeAddress, mux), false)
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

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster config (use --kubeconfig outside a cluster): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
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
			return ValidatePoolCEL(cfg.DriverName, &p.Spec)
		},
		Class: classes.Get,
	}
	srv := webhook.NewServer(ctx, w.Address, v, &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: getCert})
	go serve(ctx, cancel, "webhook", srv, true)
	return nil
}

// metricsServer serves /metrics: plain HTTP, or with cfg.MetricsAuth.Secure HTTPS where
// every request needs a bearer token that is allowed to get /metrics (pkg/metricsauth).
func metricsServer(ctx context.Context, cfg Config, restCfg *rest.Config, m *Metrics) (*http.Server, error) {
	var handler http.Handler = m.Handler()
	var tlsConfig *tls.Config
	if cfg.MetricsAuth.Secure {
		// The reviews get a client and a rate limit of their own (metricsauth.ClientQPS):
		// made-up tokens must not delay the reconciles.
		reviewCfg := rest.CopyConfig(restCfg)
		reviewCfg.QPS, reviewCfg.Burst = metricsauth.ClientQPS, metricsauth.ClientBurst
		client, err := kubernetes.NewForConfig(reviewCfg)
		if err != nil {
			return nil, fmt.Errorf("create metrics review client: %w", err)
		}
		if handler, tlsConfig, err = cfg.MetricsAuth.Protect(ctx, client, handler); err != nil {
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", handler)
	srv := newHTTPServer(cfg.MetricsAddress, mux)
	srv.TLSConfig = tlsConfig
	// Requests log through the controller's logger.
	srv.BaseContext = func(net.Listener) context.Context { return ctx }
	return srv, nil
}

// newHTTPServer is the server of the small metrics and probe endpoints, with
// timeouts so that a slow client cannot hold connections open.
func newHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 90 * time.Second,
		MaxHeaderBytes: 16 << 10,
	}
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

// serve runs srv until ctx ends; a server that cannot start ends the process.
func serve(ctx context.Context, cancel context.CancelCauseFunc, name string, srv *http.Server, useTLS bool) {
	logger := klog.FromContext(ctx).WithValues("server", name, "address", srv.Addr)
	go func() {
		<-ctx.Done()
		shutdown, done := context.WithTimeout(context.Background(), 5*time.Second)
		defer done()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("Serving")
	var err error
	if useTLS {
		err = srv.ListenAndServeTLS("", "")
	} else {
		err = srv.ListenAndServe()
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		cancel(fmt.Errorf("serve %s on %s: %w", name, srv.Addr, err))
	}
}

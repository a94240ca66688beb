package cliflags

import (
	"errors"
	"fmt"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// KubeClient is how a daemon reaches the API server, one field per flag: --kubeconfig,
// --kube-api-qps and --kube-api-burst.
type KubeClient struct {
	// Kubeconfig is a kubeconfig file; empty uses the in-cluster configuration.
	Kubeconfig string
	// QPS and Burst are the client-side rate limit: requests per second sustained, and
	// requests allowed at once above it.
	QPS   float64
	Burst int
}

// Flags returns the client flags bound to k, with def's rate limit as their defaults.
func (k *KubeClient) Flags(def KubeClient) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty uses the in-cluster configuration", EnvVars: []string{"KUBECONFIG"}, Destination: &k.Kubeconfig, TakesFile: true},
		&cli.Float64Flag{Name: "kube-api-qps", Usage: "client-side rate limit of the API requests per second (sustained)", Value: def.QPS, EnvVars: []string{"KUBE_API_QPS"}, Destination: &k.QPS},
		&cli.IntFlag{Name: "kube-api-burst", Usage: "client-side rate limit: API requests allowed at once above --kube-api-qps", Value: def.Burst, EnvVars: []string{"KUBE_API_BURST"}, Destination: &k.Burst},
	}
}

// Validate refuses a rate limit that would stop or never limit the client.
func (k KubeClient) Validate() error {
	var errs []error
	if k.QPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %g", k.QPS))
	}
	if k.Burst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", k.Burst))
	}
	return errors.Join(errs...)
}

// WithRateLimit is k with another rate limit: a second client of the same identity
// whose requests must not queue behind the first one's.
func (k KubeClient) WithRateLimit(qps float64, burst int) KubeClient {
	k.QPS, k.Burst = qps, burst
	return k
}

// RESTConfig loads the client configuration: the kubeconfig file, or in a pod the
// service account's. component names the binary in the user agent,
// "<component>/<version>".
func (k KubeClient) RESTConfig(component string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if k.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", k.Kubeconfig)
	} else if rc, err = rest.InClusterConfig(); err != nil {
		err = fmt.Errorf("%w (outside a cluster, name a kubeconfig file with --kubeconfig)", err)
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client configuration: %w", err)
	}
	rc.UserAgent = component + "/" + version.Version
	rc.QPS, rc.Burst = float32(k.QPS), k.Burst
	return rc, nil
}

// Clientset returns a typed client of the configuration (see RESTConfig).
func (k KubeClient) Clientset(component string) (kubernetes.Interface, error) {
	rc, err := k.RESTConfig(component)
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create Kubernetes client: %w", err)
	}
	return client, nil
}

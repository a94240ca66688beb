package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// component is one process of the cluster, how to start it and how to tell it is up.
type component struct {
	name  string
	argv  []string
	env   []string
	ready func(ctx context.Context) error
	// grace is how long it gets to stop after SIGTERM.
	grace time.Duration
}

// components returns the processes in start order; Down stops them in reverse.
func components(l Layout, f *host.Facts, bins *bincache.Cache, o Options) ([]component, error) {
	k := bins.Kubernetes.Path
	v := fmt.Sprintf("--v=%d", o.Verbosity)
	gates := []string{}
	if o.FeatureGates != "" {
		gates = append(gates, "--feature-gates="+o.FeatureGates)
	}
	admin, err := adminClient(l)
	if err != nil {
		return nil, err
	}
	insecure := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // self-signed health endpoints on loopback
	plain := &http.Client{Timeout: 3 * time.Second}
	kc := l.componentKubeconfig
	comps := []component{
		{
			name: "etcd",
			argv: []string{bins.Etcd.Path("etcd"), "--name=rdma-dra-local", "--data-dir=" + l.EtcdData(),
				"--listen-client-urls=" + EtcdClientURL, "--advertise-client-urls=" + EtcdClientURL,
				"--listen-peer-urls=" + etcdPeerURL, "--initial-advertise-peer-urls=" + etcdPeerURL,
				"--initial-cluster=rdma-dra-local=" + etcdPeerURL, "--listen-metrics-urls=",
				"--quota-backend-bytes=2147483648", "--log-level=warn"},
			ready: httpOK(plain, EtcdClientURL+"/health", `"health":"true"`),
			grace: 10 * time.Second,
		},
		{
			name: "kube-apiserver",
			argv: append([]string{k("kube-apiserver"), v,
				"--advertise-address=" + f.NodeIP.String(), "--bind-address=0.0.0.0", fmt.Sprintf("--secure-port=%d", APIServerPort),
				"--etcd-servers=" + EtcdClientURL,
				"--client-ca-file=" + l.pkiFile("ca.crt"),
				"--tls-cert-file=" + l.pkiFile("apiserver.crt"), "--tls-private-key-file=" + l.pkiFile("apiserver.key"),
				"--kubelet-client-certificate=" + l.pkiFile("apiserver-kubelet-client.crt"),
				"--kubelet-client-key=" + l.pkiFile("apiserver-kubelet-client.key"),
				"--kubelet-certificate-authority=" + l.pkiFile("ca.crt"),
				"--kubelet-preferred-address-types=InternalIP,Hostname",
				"--authorization-mode=Node,RBAC", "--enable-admission-plugins=NodeRestriction",
				"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file=" + l.pkiFile("sa.pub"),
				"--service-account-signing-key-file=" + l.pkiFile("sa.key"),
				"--service-cluster-ip-range=" + ServiceCIDR, "--allow-privileged=true",
				"--runtime-config=" + o.RuntimeConfig, "--profiling=false",
			}, gates...),
			ready: httpOK(admin, l.APIServerURL()+"/readyz", "ok"),
			grace: 15 * time.Second,
		},
		{
			name: "kube-controller-manager",
			argv: append([]string{k("kube-controller-manager"), v,
				"--kubeconfig=" + kc("kube-controller-manager"),
				"--authentication-kubeconfig=" + kc("kube-controller-manager"),
				"--authorization-kubeconfig=" + kc("kube-controller-manager"),
				"--bind-address=127.0.0.1", "--leader-elect=false",
				"--controllers=*,bootstrapsigner,tokencleaner",
				"--root-ca-file=" + l.pkiFile("ca.crt"),
				"--service-account-private-key-file=" + l.pkiFile("sa.key"),
				"--use-service-account-credentials=true",
				"--cluster-signing-cert-file=" + l.pkiFile("ca.crt"), "--cluster-signing-key-file=" + l.pkiFile("ca.key"),
				"--service-cluster-ip-range=" + ServiceCIDR, "--cluster-cidr=" + ClusterCIDR, "--allocate-node-cidrs=false",
			}, gates...),
			ready: httpOK(insecure, "https://127.0.0.1:10257/healthz", "ok"),
			grace: 10 * time.Second,
		},
		{
			name: "kube-scheduler",
			argv: append([]string{k("kube-scheduler"), v,
				"--kubeconfig=" + kc("kube-scheduler"),
				"--authentication-kubeconfig=" + kc("kube-scheduler"),
				"--authorization-kubeconfig=" + kc("kube-scheduler"),
				"--bind-address=127.0.0.1", "--leader-elect=false",
			}, gates...),
			ready: httpOK(insecure, "https://127.0.0.1:10259/healthz", "ok"),
			grace: 10 * time.Second,
		},
		{
			name: "containerd",
			argv: []string{bins.Containerd.Path("containerd"), "--config=" + filepath.Join(l.Config(), "containerd.toml")},
			// The shims it starts find our shim binary on PATH first.
			env:   []string{"PATH=" + bins.Containerd.Dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
			ready: ctrReady(l, bins),
			grace: 15 * time.Second,
		},
		{
			name: "kubelet",
			argv: []string{k("kubelet"), v,
				"--config=" + filepath.Join(l.Config(), "kubelet.yaml"),
				"--kubeconfig=" + kc("kubelet"), "--root-dir=" + l.KubeletRoot(),
				"--cert-dir=" + filepath.Join(l.KubeletRoot(), "pki"),
				"--hostname-override=" + f.NodeName, "--node-ip=" + f.NodeIP.String(),
			},
			ready: httpOK(plain, "http://127.0.0.1:10248/healthz", "ok"),
			grace: 15 * time.Second,
		},
		{
			name:  "kube-proxy",
			argv:  []string{k("kube-proxy"), v, "--config=" + filepath.Join(l.Config(), "kube-proxy.yaml")},
			ready: httpOK(plain, "http://127.0.0.1:10256/livez", ""),
			grace: 10 * time.Second,
		},
	}
	return comps, nil
}

// adminClient is an HTTPS client with the admin's certificate that trusts the cluster CA.
func adminClient(l Layout) (*http.Client, error) {
	pair, err := tls.LoadX509KeyPair(l.pkiFile("admin.crt"), l.pkiFile("admin.key"))
	if err != nil {
		return nil, fmt.Errorf("load admin certificate: %w", err)
	}
	caPEM, err := os.ReadFile(l.pkiFile("ca.crt"))
	if err != nil {
		return nil, fmt.Errorf("read CA: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, MinVersion: tls.VersionTLS12},
	}}, nil
}

// httpOK checks that url answers 200 and, if want is set, that the body contains it.
func httpOK(c *http.Client, url, want string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, body)
		}
		return nil
	}
}

func ctrReady(l Layout, bins *bincache.Cache) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := ctr(ctx, l, bins, "version")
		return err
	}
}

// waitFor polls check every half second until it succeeds, the process dies or the timeout
// passes.
func waitFor(ctx context.Context, what string, timeout time.Duration, alive func() bool, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		cctx, ccancel := context.WithTimeout(ctx, 5*time.Second)
		last = check(cctx)
		ccancel()
		if last == nil {
			return nil
		}
		if alive != nil && !alive() {
			return fmt.Errorf("%s exited: %w", what, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %w", what, timeout, last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

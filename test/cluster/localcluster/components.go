package localcluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// component is one process of the cluster, how to start it and how to tell it is up.
type component struct {
	name  string
	argv  []string
	env   []string
	ready controlplane.Check
	// grace is how long it gets to stop after SIGTERM.
	grace time.Duration
}

// components returns the processes in start order; Down stops them in reverse (stopOrder).
func components(l Layout, f *host.Facts, bins *bincache.Cache, o Options) ([]component, error) {
	admin, err := adminClient(l)
	if err != nil {
		return nil, err
	}
	return componentInputs{l: l, f: f, bins: bins, o: o}.components(probes{
		admin:    admin,
		insecure: controlplane.SelfSignedClient(3 * time.Second),
		plain:    &http.Client{Timeout: 3 * time.Second},
	}), nil
}

// componentInputs is what the components' command lines are made of.
type componentInputs struct {
	l    Layout
	f    *host.Facts
	bins *bincache.Cache
	o    Options
}

// probes are the HTTP clients of the readiness checks: admin holds the admin's
// certificate for the API server, insecure takes the self-signed health endpoints of the
// controller manager and the scheduler, plain speaks HTTP.
type probes struct {
	admin, insecure, plain *http.Client
}

// components builds every component in start order.
func (in componentInputs) components(p probes) []component {
	return []component{
		in.etcd(p),
		in.apiServer(p),
		in.controllerManager(p),
		in.scheduler(p),
		in.containerd(),
		in.kubelet(p),
		in.kubeProxy(p),
	}
}

// kube is the start of a Kubernetes binary's command line: the binary and --v.
func (in componentInputs) kube(bin string, flags ...string) []string {
	return append([]string{in.bins.Kubernetes.Path(bin), fmt.Sprintf("--v=%d", in.o.Verbosity)}, flags...)
}

// The control-plane programs' command lines are controlplane's, shared with the
// benchmark and scale harnesses; what follows them here is the local cluster's own.

func (in componentInputs) etcd(p probes) component {
	return component{
		name: "etcd",
		argv: slices.Concat([]string{in.bins.Etcd.Path("etcd")}, controlplane.EtcdArgs(controlplane.EtcdSpec{
			Name: "rdma-dra-local", DataDir: in.l.EtcdData(), ClientURL: EtcdClientURL, PeerURL: etcdPeerURL,
		}), []string{"--quota-backend-bytes=2147483648"}),
		ready: controlplane.HTTPCheck(p.plain, EtcdClientURL+"/health", `"health":"true"`),
		grace: 10 * time.Second,
	}
}

func (in componentInputs) apiServer(p probes) component {
	l := in.l
	return component{
		name: "kube-apiserver",
		argv: slices.Concat(in.kube("kube-apiserver"), controlplane.APIServerArgs(controlplane.APIServerSpec{
			EtcdURL: EtcdClientURL, BindAddress: "0.0.0.0", AdvertiseAddress: in.f.NodeIP.String(), SecurePort: APIServerPort,
			PKIDir: l.PKI(), FeatureGates: in.o.FeatureGates,
		}), []string{
			// The kubelet serves logs, exec and port-forward; the API server calls it with a
			// client certificate and checks its serving certificate.
			"--kubelet-client-certificate=" + l.pkiFile("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + l.pkiFile("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + l.pkiFile("ca.crt"),
			"--kubelet-preferred-address-types=InternalIP,Hostname",
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--runtime-config=" + in.o.RuntimeConfig,
		}),
		ready: controlplane.HTTPCheck(p.admin, l.APIServerURL()+"/readyz", "ok"),
		grace: 15 * time.Second,
	}
}

func (in componentInputs) controllerManager(p probes) component {
	l := in.l
	return component{
		name: "kube-controller-manager",
		argv: slices.Concat(in.kube("kube-controller-manager"), controlplane.ControllerManagerArgs(controlplane.ControllerManagerSpec{
			ComponentSpec: in.componentSpec("kube-controller-manager"),
			Controllers:   []string{"*", "bootstrapsigner", "tokencleaner"},
		}), []string{
			"--root-ca-file=" + l.pkiFile("ca.crt"),
			"--service-account-private-key-file=" + l.pkiFile("sa.key"),
			"--use-service-account-credentials=true",
			"--cluster-signing-cert-file=" + l.pkiFile("ca.crt"), "--cluster-signing-key-file=" + l.pkiFile("ca.key"),
			"--service-cluster-ip-range=" + ServiceCIDR, "--cluster-cidr=" + ClusterCIDR, "--allocate-node-cidrs=false",
		}),
		ready: controlplane.HTTPCheck(p.insecure, "https://127.0.0.1:10257/healthz", "ok"),
		grace: 10 * time.Second,
	}
}

func (in componentInputs) scheduler(p probes) component {
	return component{
		name: "kube-scheduler",
		argv: append(in.kube("kube-scheduler"), controlplane.SchedulerArgs(controlplane.SchedulerSpec{
			ComponentSpec: in.componentSpec("kube-scheduler"),
		})...),
		ready: controlplane.HTTPCheck(p.insecure, "https://127.0.0.1:10259/healthz", "ok"),
		grace: 10 * time.Second,
	}
}

// componentSpec is how the scheduler and the controller manager run here: with their own
// kubeconfig on their default ports, with the cluster's feature gates.
func (in componentInputs) componentSpec(name string) controlplane.ComponentSpec {
	return controlplane.ComponentSpec{Kubeconfig: in.l.componentKubeconfig(name), FeatureGates: in.o.FeatureGates}
}

func (in componentInputs) containerd() component {
	return component{
		name: "containerd",
		argv: []string{in.bins.Containerd.Path("containerd"), "--config=" + in.l.containerdConfigFile()},
		// The shims it starts find our shim binary on PATH first.
		env:   []string{"PATH=" + in.bins.Containerd.Dir + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		ready: ctrReady(in.l, in.bins),
		grace: 15 * time.Second,
	}
}

func (in componentInputs) kubelet(p probes) component {
	l := in.l
	return component{
		name: "kubelet",
		argv: in.kube("kubelet",
			"--config="+l.kubeletConfigFile(),
			"--kubeconfig="+l.componentKubeconfig("kubelet"), "--root-dir="+l.KubeletRoot(),
			"--cert-dir="+filepath.Join(l.KubeletRoot(), "pki"),
			"--hostname-override="+in.f.NodeName, "--node-ip="+in.f.NodeIP.String(),
		),
		ready: controlplane.HTTPCheck(p.plain, "http://127.0.0.1:10248/healthz", "ok"),
		grace: 15 * time.Second,
	}
}

func (in componentInputs) kubeProxy(p probes) component {
	return component{
		name:  "kube-proxy",
		argv:  in.kube("kube-proxy", "--config="+in.l.kubeProxyConfigFile()),
		ready: controlplane.HTTPCheck(p.plain, "http://127.0.0.1:10256/livez", ""),
		grace: 10 * time.Second,
	}
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

func ctrReady(l Layout, bins *bincache.Cache) controlplane.Check {
	return func(ctx context.Context) error {
		_, err := ctr(ctx, l, bins, "version")
		return err
	}
}

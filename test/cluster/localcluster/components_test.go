package localcluster

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// testInputs is a cluster under /repo with binaries in /cache.
func testInputs(o Options) componentInputs {
	return componentInputs{
		l: NewLayout("/repo"),
		f: &host.Facts{NodeName: "node-a", NodeIP: net.IPv4(192, 0, 2, 7)},
		bins: &bincache.Cache{
			Kubernetes: bincache.Component{Dir: "/cache/kubernetes"},
			Etcd:       bincache.Component{Dir: "/cache/etcd"},
			Containerd: bincache.Component{Dir: "/cache/containerd"},
		},
		o: o,
	}
}

// flagsOf maps each --name=value of argv[1:] to its value; a flag given twice is an error.
func flagsOf(t *testing.T, argv []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, a := range argv[1:] {
		name, value, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(name, "--") {
			t.Fatalf("argument %q is not --name=value", a)
		}
		if _, dup := out[name]; dup {
			t.Errorf("flag %s given twice in %q", name, argv)
		}
		out[name] = value
	}
	return out
}

// TestComponentArgv pins every component's whole command line: the binary and every
// flag with its value (the control-plane flags come from package controlplane, the rest
// is the local cluster's own). The e2e suite depends on them.
func TestComponentArgv(t *testing.T) {
	const out = "/repo/_output/local-cluster"
	pki := func(name string) string { return out + "/pki/" + name }
	kc := func(name string) string { return out + "/kubeconfigs/" + name + ".kubeconfig" }
	options := []struct {
		name string
		o    Options
	}{
		{"defaults", Options{RuntimeConfig: DefaultRuntimeConfig, Verbosity: 2}},
		{"gates and verbosity", Options{FeatureGates: "DRAConsumableCapacity=true,DRAPartitionableDevices=false", RuntimeConfig: "resource.k8s.io/v1alpha3=true", Verbosity: 6}},
	}
	for _, opt := range options {
		in := testInputs(opt.o)
		// Every flag of every component, by component, in start order; --v is added to the
		// Kubernetes programs' and --feature-gates to those with gates.
		want := []struct {
			name, bin string
			flags     map[string]string
			gates     bool
		}{
			{"etcd", "/cache/etcd/etcd", map[string]string{
				"--name": "rdma-dra-local", "--data-dir": StateRoot + "/etcd",
				"--listen-client-urls": EtcdClientURL, "--advertise-client-urls": EtcdClientURL,
				"--listen-peer-urls": "http://127.0.0.1:12380", "--initial-advertise-peer-urls": "http://127.0.0.1:12380",
				"--initial-cluster": "rdma-dra-local=http://127.0.0.1:12380", "--listen-metrics-urls": "",
				"--quota-backend-bytes": "2147483648", "--log-level": "warn",
			}, false},
			{"kube-apiserver", "/cache/kubernetes/kube-apiserver", map[string]string{
				"--advertise-address": "192.0.2.7", "--bind-address": "0.0.0.0", "--secure-port": "6443",
				"--etcd-servers":   EtcdClientURL,
				"--client-ca-file": pki("ca.crt"), "--tls-cert-file": pki("apiserver.crt"), "--tls-private-key-file": pki("apiserver.key"),
				"--kubelet-client-certificate": pki("apiserver-kubelet-client.crt"), "--kubelet-client-key": pki("apiserver-kubelet-client.key"),
				"--kubelet-certificate-authority": pki("ca.crt"), "--kubelet-preferred-address-types": "InternalIP,Hostname",
				"--authorization-mode": "Node,RBAC", "--enable-admission-plugins": "NodeRestriction",
				"--service-account-issuer":   "https://kubernetes.default.svc.cluster.local",
				"--service-account-key-file": pki("sa.pub"), "--service-account-signing-key-file": pki("sa.key"),
				"--service-cluster-ip-range": "10.96.0.0/16", "--allow-privileged": "true",
				"--runtime-config": opt.o.RuntimeConfig, "--profiling": "false",
			}, true},
			{"kube-controller-manager", "/cache/kubernetes/kube-controller-manager", map[string]string{
				"--kubeconfig": kc("kube-controller-manager"), "--authentication-kubeconfig": kc("kube-controller-manager"),
				"--authorization-kubeconfig": kc("kube-controller-manager"),
				"--bind-address":             "127.0.0.1", "--leader-elect": "false",
				"--controllers":  "*,bootstrapsigner,tokencleaner",
				"--root-ca-file": pki("ca.crt"), "--service-account-private-key-file": pki("sa.key"),
				"--use-service-account-credentials": "true",
				"--cluster-signing-cert-file":       pki("ca.crt"), "--cluster-signing-key-file": pki("ca.key"),
				"--service-cluster-ip-range": "10.96.0.0/16", "--cluster-cidr": ClusterCIDR, "--allocate-node-cidrs": "false",
			}, true},
			{"kube-scheduler", "/cache/kubernetes/kube-scheduler", map[string]string{
				"--kubeconfig": kc("kube-scheduler"), "--authentication-kubeconfig": kc("kube-scheduler"),
				"--authorization-kubeconfig": kc("kube-scheduler"),
				"--bind-address":             "127.0.0.1", "--leader-elect": "false",
			}, true},
			{"containerd", "/cache/containerd/containerd", map[string]string{
				"--config": out + "/config/containerd.toml",
			}, false},
			{"kubelet", "/cache/kubernetes/kubelet", map[string]string{
				"--config": out + "/config/kubelet.yaml", "--kubeconfig": kc("kubelet"),
				"--root-dir": StateRoot + "/kubelet", "--cert-dir": StateRoot + "/kubelet/pki",
				"--hostname-override": "node-a", "--node-ip": "192.0.2.7",
			}, false},
			{"kube-proxy", "/cache/kubernetes/kube-proxy", map[string]string{
				"--config": out + "/config/kube-proxy.yaml",
			}, false},
		}
		comps := in.components(probes{})
		if len(comps) != len(want) {
			t.Fatalf("%d components, want %d", len(comps), len(want))
		}
		for i, w := range want {
			t.Run(opt.name+"/"+w.name, func(t *testing.T) {
				c := comps[i]
				if c.name != w.name {
					t.Fatalf("component %d is %s, want %s", i, c.name, w.name)
				}
				if c.argv[0] != w.bin {
					t.Errorf("binary = %s, want %s", c.argv[0], w.bin)
				}
				if c.ready == nil || c.grace <= 0 {
					t.Errorf("ready = %p, grace = %s: want a check and a grace period", c.ready, c.grace)
				}
				flags := maps.Clone(w.flags)
				if strings.HasPrefix(w.bin, "/cache/kubernetes/") {
					flags["--v"] = strconv.Itoa(opt.o.Verbosity)
				}
				if w.gates && opt.o.FeatureGates != "" {
					flags["--feature-gates"] = opt.o.FeatureGates
				}
				got := flagsOf(t, c.argv)
				for f, v := range flags {
					if g, ok := got[f]; !ok || g != v {
						t.Errorf("%s = %q (given: %t), want %q", f, g, ok, v)
					}
				}
				for f, g := range got {
					if _, ok := flags[f]; !ok {
						t.Errorf("%s = %q given, want no such flag", f, g)
					}
				}
			})
		}
	}
}

func TestContainerdPath(t *testing.T) {
	c := testInputs(Options{}).containerd()
	// The shims containerd starts must find the cached shim before any on the host.
	if len(c.env) != 1 || !strings.HasPrefix(c.env[0], "PATH=/cache/containerd:") {
		t.Errorf("containerd's environment = %q, want PATH with /cache/containerd first", c.env)
	}
}

func TestStopOrderReversesStart(t *testing.T) {
	var start []string
	for _, c := range testInputs(Options{}).components(probes{}) {
		start = append(start, c.name)
	}
	stop := slices.Clone(stopOrder)
	slices.Reverse(stop)
	if !slices.Equal(start, stop) {
		t.Errorf("stopOrder reversed = %q, want the start order %q", stop, start)
	}
}

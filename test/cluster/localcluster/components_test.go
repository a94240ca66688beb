package localcluster

import (
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

func TestComponentArgv(t *testing.T) {
	options := []struct {
		name string
		o    Options
	}{
		{"defaults", Options{RuntimeConfig: DefaultRuntimeConfig, Verbosity: 2}},
		{"gates and verbosity", Options{FeatureGates: "DRAConsumableCapacity=true,DRAPartitionableDevices=false", RuntimeConfig: "resource.k8s.io/v1alpha3=true", Verbosity: 6}},
	}
	for _, opt := range options {
		in := testInputs(opt.o)
		l := in.l
		// Flags every component must have, by component, in start order.
		want := []struct {
			name, bin string
			flags     map[string]string
			gates     bool
		}{
			{"etcd", "/cache/etcd/etcd", map[string]string{
				"--data-dir": StateRoot + "/etcd", "--listen-client-urls": EtcdClientURL, "--listen-metrics-urls": "",
			}, false},
			{"kube-apiserver", "/cache/kubernetes/kube-apiserver", map[string]string{
				"--runtime-config": opt.o.RuntimeConfig, "--advertise-address": "192.0.2.7",
				"--etcd-servers": EtcdClientURL, "--secure-port": "6443", "--client-ca-file": "/repo/_output/local-cluster/pki/ca.crt",
				"--service-cluster-ip-range": ServiceCIDR, "--authorization-mode": "Node,RBAC",
			}, true},
			{"kube-controller-manager", "/cache/kubernetes/kube-controller-manager", map[string]string{
				"--kubeconfig": l.componentKubeconfig("kube-controller-manager"), "--cluster-signing-key-file": "/repo/_output/local-cluster/pki/ca.key",
				"--cluster-cidr": ClusterCIDR, "--leader-elect": "false",
			}, true},
			{"kube-scheduler", "/cache/kubernetes/kube-scheduler", map[string]string{
				"--kubeconfig": l.componentKubeconfig("kube-scheduler"), "--authorization-kubeconfig": l.componentKubeconfig("kube-scheduler"),
			}, true},
			{"containerd", "/cache/containerd/containerd", map[string]string{
				"--config": "/repo/_output/local-cluster/config/containerd.toml",
			}, false},
			{"kubelet", "/cache/kubernetes/kubelet", map[string]string{
				"--config": "/repo/_output/local-cluster/config/kubelet.yaml", "--root-dir": StateRoot + "/kubelet",
				"--hostname-override": "node-a", "--node-ip": "192.0.2.7", "--kubeconfig": l.componentKubeconfig("kubelet"),
			}, false},
			{"kube-proxy", "/cache/kubernetes/kube-proxy", map[string]string{
				"--config": "/repo/_output/local-cluster/config/kube-proxy.yaml",
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
				got := flagsOf(t, c.argv)
				for f, v := range w.flags {
					if g, ok := got[f]; !ok || g != v {
						t.Errorf("%s = %q (given: %t), want %q", f, g, ok, v)
					}
				}
				if kube := strings.HasPrefix(w.bin, "/cache/kubernetes/"); kube && got["--v"] != strconv.Itoa(opt.o.Verbosity) {
					t.Errorf("--v = %q, want %d", got["--v"], opt.o.Verbosity)
				}
				gates, ok := got["--feature-gates"]
				switch {
				case w.gates && opt.o.FeatureGates != "" && gates != opt.o.FeatureGates:
					t.Errorf("--feature-gates = %q (given: %t), want %q", gates, ok, opt.o.FeatureGates)
				case (!w.gates || opt.o.FeatureGates == "") && ok:
					t.Errorf("--feature-gates = %q given, want none", gates)
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

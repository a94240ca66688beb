package controlplane

import (
	"slices"
	"strings"
	"testing"
)

// checkArgs compares a command line with the wanted one, flag for flag and in order, and
// checks that no flag is given twice.
func checkArgs(t *testing.T, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("args:\n got %q\nwant %q", got, want)
	}
	seen := map[string]bool{}
	for _, a := range got {
		name, _, _ := strings.Cut(a, "=")
		if seen[name] {
			t.Errorf("flag %s given twice in %q", name, got)
		}
		seen[name] = true
	}
}

func TestEtcdArgs(t *testing.T) {
	tests := []struct {
		name string
		spec EtcdSpec
		want []string
	}{
		{
			name: "fixed ports",
			spec: EtcdSpec{Name: "local", DataDir: "/var/lib/etcd", ClientURL: "http://127.0.0.1:12379", PeerURL: "http://127.0.0.1:12380"},
			want: []string{
				"--name=local", "--data-dir=/var/lib/etcd",
				"--listen-client-urls=http://127.0.0.1:12379", "--advertise-client-urls=http://127.0.0.1:12379",
				"--listen-peer-urls=http://127.0.0.1:12380", "--initial-advertise-peer-urls=http://127.0.0.1:12380",
				"--initial-cluster=local=http://127.0.0.1:12380",
				"--listen-metrics-urls=", "--log-level=warn",
			},
		},
		{
			name: "the member name names the initial cluster's member",
			spec: EtcdSpec{Name: "bench", DataDir: "/tmp/x/etcd", ClientURL: "http://127.0.0.1:40001", PeerURL: "http://127.0.0.1:40002"},
			want: []string{
				"--name=bench", "--data-dir=/tmp/x/etcd",
				"--listen-client-urls=http://127.0.0.1:40001", "--advertise-client-urls=http://127.0.0.1:40001",
				"--listen-peer-urls=http://127.0.0.1:40002", "--initial-advertise-peer-urls=http://127.0.0.1:40002",
				"--initial-cluster=bench=http://127.0.0.1:40002",
				"--listen-metrics-urls=", "--log-level=warn",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkArgs(t, EtcdArgs(tt.spec), tt.want)
		})
	}
}

func TestAPIServerArgs(t *testing.T) {
	// common are the flags after the addresses and port: PKI of /pki, authorization,
	// service accounts, service range, profiling.
	common := []string{
		"--client-ca-file=/pki/ca.crt", "--tls-cert-file=/pki/apiserver.crt", "--tls-private-key-file=/pki/apiserver.key",
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=/pki/sa.pub", "--service-account-signing-key-file=/pki/sa.key",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--profiling=false",
	}
	tests := []struct {
		name string
		spec APIServerSpec
		want []string
	}{
		{
			name: "all interfaces, no feature gates",
			spec: APIServerSpec{EtcdURL: "http://127.0.0.1:12379", BindAddress: "0.0.0.0", AdvertiseAddress: "192.0.2.7", SecurePort: 6443, PKIDir: "/pki"},
			want: slices.Concat([]string{
				"--etcd-servers=http://127.0.0.1:12379", "--bind-address=0.0.0.0", "--advertise-address=192.0.2.7", "--secure-port=6443",
			}, common),
		},
		{
			name: "loopback with feature gates",
			spec: APIServerSpec{EtcdURL: "http://127.0.0.1:40001", BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1", SecurePort: 40003, PKIDir: "/pki", FeatureGates: "A=true,B=false"},
			want: slices.Concat([]string{
				"--etcd-servers=http://127.0.0.1:40001", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=40003",
			}, common, []string{"--feature-gates=A=true,B=false"}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkArgs(t, APIServerArgs(tt.spec), tt.want)
		})
	}
}

func TestSchedulerArgs(t *testing.T) {
	tests := []struct {
		name string
		spec SchedulerSpec
		want []string
	}{
		{
			name: "kubeconfig, default port",
			spec: SchedulerSpec{ComponentSpec: ComponentSpec{Kubeconfig: "/kc/s.kubeconfig"}},
			want: []string{
				"--kubeconfig=/kc/s.kubeconfig",
				"--authentication-kubeconfig=/kc/s.kubeconfig", "--authorization-kubeconfig=/kc/s.kubeconfig",
				"--bind-address=127.0.0.1", "--leader-elect=false",
			},
		},
		{
			// The configuration file replaces --kubeconfig, which the scheduler would ignore.
			name: "configuration file, port, open paths, gates",
			spec: SchedulerSpec{
				ComponentSpec: ComponentSpec{Kubeconfig: "/admin.kubeconfig", SecurePort: 40010, AlwaysAllowPaths: []string{"/healthz", "/metrics"}, FeatureGates: "A=true"},
				ConfigFile:    "/s/kube-scheduler.yaml",
			},
			want: []string{
				"--config=/s/kube-scheduler.yaml",
				"--authentication-kubeconfig=/admin.kubeconfig", "--authorization-kubeconfig=/admin.kubeconfig",
				"--bind-address=127.0.0.1", "--leader-elect=false",
				"--secure-port=40010", "--authorization-always-allow-paths=/healthz,/metrics", "--feature-gates=A=true",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkArgs(t, SchedulerArgs(tt.spec), tt.want)
		})
	}
}

func TestControllerManagerArgs(t *testing.T) {
	tests := []struct {
		name string
		spec ControllerManagerSpec
		want []string
	}{
		{
			name: "controllers, default limits and port",
			spec: ControllerManagerSpec{ComponentSpec: ComponentSpec{Kubeconfig: "/kc/m.kubeconfig", FeatureGates: "A=true"}, Controllers: []string{"*", "bootstrapsigner"}},
			want: []string{
				"--kubeconfig=/kc/m.kubeconfig", "--controllers=*,bootstrapsigner",
				"--authentication-kubeconfig=/kc/m.kubeconfig", "--authorization-kubeconfig=/kc/m.kubeconfig",
				"--bind-address=127.0.0.1", "--leader-elect=false", "--feature-gates=A=true",
			},
		},
		{
			name: "limits, port, open paths",
			spec: ControllerManagerSpec{
				ComponentSpec: ComponentSpec{Kubeconfig: "/admin.kubeconfig", SecurePort: 40011, AlwaysAllowPaths: []string{"/healthz"}},
				Controllers:   []string{"resourceclaim-controller"},
				Limits:        ClientLimits{QPS: 1000, Burst: 2000},
			},
			want: []string{
				"--kubeconfig=/admin.kubeconfig", "--controllers=resourceclaim-controller", "--kube-api-qps=1000", "--kube-api-burst=2000",
				"--authentication-kubeconfig=/admin.kubeconfig", "--authorization-kubeconfig=/admin.kubeconfig",
				"--bind-address=127.0.0.1", "--leader-elect=false",
				"--secure-port=40011", "--authorization-always-allow-paths=/healthz",
			},
		},
		{
			name: "no controllers: the program's default set",
			spec: ControllerManagerSpec{ComponentSpec: ComponentSpec{Kubeconfig: "/k"}},
			want: []string{
				"--kubeconfig=/k",
				"--authentication-kubeconfig=/k", "--authorization-kubeconfig=/k",
				"--bind-address=127.0.0.1", "--leader-elect=false",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkArgs(t, ControllerManagerArgs(tt.spec), tt.want)
		})
	}
}

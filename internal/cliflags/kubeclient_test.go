package cliflags

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
)

// TestKubeClient runs the client flags through the parser, the validation and the
// loading of the configuration.
func TestKubeClient(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://api.example:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	def := KubeClient{QPS: 50, Burst: 100}
	tests := []struct {
		name      string
		args      []string
		env       map[string]string
		want      KubeClient
		wantValid string
		wantLoad  string
	}{
		{name: "defaults, outside a cluster", want: def, wantLoad: "outside a cluster, name a kubeconfig file with --kubeconfig"},
		{name: "flags", args: []string{"--kubeconfig", kubeconfig, "--kube-api-qps=7.5", "--kube-api-burst=9"},
			want: KubeClient{Kubeconfig: kubeconfig, QPS: 7.5, Burst: 9}},
		{name: "environment", env: map[string]string{"KUBECONFIG": kubeconfig, "KUBE_API_QPS": "3", "KUBE_API_BURST": "4"},
			want: KubeClient{Kubeconfig: kubeconfig, QPS: 3, Burst: 4}},
		{name: "missing kubeconfig", args: []string{"--kubeconfig=/nonexistent/kubeconfig"},
			want: KubeClient{Kubeconfig: "/nonexistent/kubeconfig", QPS: 50, Burst: 100}, wantLoad: "load Kubernetes client configuration"},
		{name: "zero QPS", args: []string{"--kube-api-qps=0"}, want: KubeClient{QPS: 0, Burst: 100}, wantValid: "--kube-api-qps must be positive, got 0"},
		{name: "zero burst", args: []string{"--kube-api-burst=0"}, want: KubeClient{QPS: 50, Burst: 0}, wantValid: "--kube-api-burst must be at least 1, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KUBERNETES_SERVICE_HOST", "") // never the in-cluster configuration
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			var k KubeClient
			app := &cli.App{Flags: k.Flags(def), Action: func(*cli.Context) error { return nil }}
			if err := app.Run(append([]string{"bin"}, tt.args...)); err != nil {
				t.Fatal(err)
			}
			if k != tt.want {
				t.Errorf("parsed %+v, want %+v", k, tt.want)
			}
			if err := k.Validate(); (err == nil) != (tt.wantValid == "") || err != nil && !strings.Contains(err.Error(), tt.wantValid) {
				t.Errorf("Validate: %v, want %q", err, tt.wantValid)
			}
			if tt.wantValid != "" {
				return
			}
			rc, err := k.RESTConfig("rdma-dra-test")
			if tt.wantLoad != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantLoad) {
					t.Errorf("RESTConfig: %v, want an error with %q", err, tt.wantLoad)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if rc.Host != "https://api.example:6443" || rc.QPS != float32(tt.want.QPS) || rc.Burst != tt.want.Burst || rc.UserAgent != "rdma-dra-test/"+version.Version {
				t.Errorf("RESTConfig: host %s, QPS %g, burst %d, user agent %q", rc.Host, rc.QPS, rc.Burst, rc.UserAgent)
			}
			// A second client of the same identity with a rate limit of its own.
			other, err := k.WithRateLimit(1, 2).RESTConfig("rdma-dra-test")
			if err != nil || other.QPS != 1 || other.Burst != 2 || other.Host != rc.Host || k != tt.want {
				t.Errorf("WithRateLimit: %+v, %v; the original became %+v", other, err, k)
			}
		})
	}
}

package framework

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// writeLocalEnv writes a local cluster's env file below repo, as `make cluster-up` does,
// with kubeconfig as its KUBECONFIG, and returns the kubeconfig's path.
func writeLocalEnv(t *testing.T, repo string) string {
	t.Helper()
	kubeconfig := filepath.Join(repo, "_output", "local-cluster", "kubeconfig")
	env := strings.Join([]string{
		"# Written by make cluster-up: source it to use the local cluster.",
		`export KUBECONFIG="` + kubeconfig + `"`,
		`export LOCALCLUSTER_NODE="node-a"`,
		`export LOCALCLUSTER_KUBELET_DIR="/var/lib/rdma-dra-local/kubelet"`,
		`export LOCALCLUSTER_DEVICE_METADATA_ROOT="/run/rdma-dra-local/metadata"`,
	}, "\n") + "\n"
	if err := os.MkdirAll(filepath.Dir(localEnvFile(repo)), 0o755); err != nil {
		t.Fatal(err)
	}
	for path, data := range map[string]string{localEnvFile(repo): env, kubeconfig: "apiVersion: v1\n"} {
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return kubeconfig
}

// TestResolve: the local cluster is tested when KUBECONFIG is unset or names its
// kubeconfig, with its node, values, mock profile and host; any other cluster needs
// E2E_NODE and has no host; the E2E_ variables override.
func TestResolve(t *testing.T) {
	local := t.TempDir()
	localKubeconfig := writeLocalEnv(t, local)
	linked := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.Symlink(localKubeconfig, linked); err != nil {
		t.Fatal(err)
	}
	noLocal := t.TempDir()
	tests := []struct {
		name string
		repo string
		env  map[string]string
		want config
		// wantLocal: the local cluster is the one under test.
		wantLocal bool
		wantErr   string
	}{
		{
			name:      "local cluster, KUBECONFIG unset",
			repo:      local,
			want:      config{kubeconfig: localKubeconfig, node: "node-a", values: []string{localValuesFile(local)}, mockProfile: SuiteMockProfile},
			wantLocal: true,
		},
		{
			name: "local cluster through a link to its kubeconfig",
			repo: local, env: map[string]string{EnvKubeconfig: linked},
			want:      config{kubeconfig: linked, node: "node-a", values: []string{localValuesFile(local)}, mockProfile: SuiteMockProfile},
			wantLocal: true,
		},
		{
			name: "local cluster without host access, other values, hardware",
			repo: local, env: map[string]string{EnvHost: "none", EnvValues: "/a.yaml,/b.yaml", EnvMockProfile: "none"},
			want:      config{kubeconfig: localKubeconfig, node: "node-a", values: []string{"/a.yaml", "/b.yaml"}, mockProfile: noMock, noHost: "E2E_HOST=none"},
			wantLocal: true,
		},
		{
			name: "another cluster while the local one is up",
			repo: local, env: map[string]string{EnvKubeconfig: "/kind.kubeconfig", EnvNode: "rdma-dra-control-plane"},
			want: config{kubeconfig: "/kind.kubeconfig", node: "rdma-dra-control-plane", noHost: "only the local cluster's host is reachable (docs/e2e.md)"},
		},
		{
			name: "another cluster, mock profile given",
			repo: noLocal, env: map[string]string{EnvKubeconfig: "/kind.kubeconfig", EnvNode: "n", EnvMockProfile: "dgx-h100"},
			want: config{kubeconfig: "/kind.kubeconfig", node: "n", mockProfile: "dgx-h100", noHost: "only the local cluster's host is reachable (docs/e2e.md)"},
		},
		{name: "another cluster without E2E_NODE", repo: local, env: map[string]string{EnvKubeconfig: "/kind.kubeconfig"}, wantErr: "set E2E_NODE"},
		{name: "no cluster at all", repo: noLocal, wantErr: "no cluster to test"},
		{name: "several kubeconfigs", repo: noLocal, env: map[string]string{EnvKubeconfig: "/a:/b", EnvNode: "n"}, wantErr: "names several files"},
		{name: "unknown E2E_HOST", repo: local, env: map[string]string{EnvHost: "ssh"}, wantErr: "the only value is none"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolve(tc.repo, func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("resolve: %v, want an error with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got.local != nil) != tc.wantLocal {
				t.Errorf("the local cluster is tested: %v, want %v", got.local != nil, tc.wantLocal)
			}
			got.local = nil
			if got.kubeconfig != tc.want.kubeconfig || got.node != tc.want.node || !slices.Equal(got.values, tc.want.values) ||
				got.mockProfile != tc.want.mockProfile || got.noHost != tc.want.noHost {
				t.Errorf("resolve = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestResolveOldLocalCluster: an env file of a cluster started before the device
// metadata root existed says to start it again.
func TestResolveOldLocalCluster(t *testing.T) {
	repo := t.TempDir()
	writeLocalEnv(t, repo)
	data, err := os.ReadFile(localEnvFile(repo))
	if err != nil {
		t.Fatal(err)
	}
	old := strings.ReplaceAll(string(data), "LOCALCLUSTER_DEVICE_METADATA_ROOT", "OTHER")
	if err := os.WriteFile(localEnvFile(repo), []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolve(repo, func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "make cluster-down && make cluster-up") {
		t.Fatalf("resolve: %v, want the advice to start the cluster again", err)
	}
}

func TestMockProfile(t *testing.T) {
	tests := []struct{ configured, label, want string }{
		{"", "", ""},
		{"", "dgx-h100", "dgx-h100"},
		{"mixed-bond", "dgx-h100", "mixed-bond"},
		{"none", "dgx-h100", ""},
	}
	for _, tc := range tests {
		t.Run(tc.configured+"/"+tc.label, func(t *testing.T) {
			if got := mockProfile(tc.configured, tc.label); got != tc.want {
				t.Errorf("mockProfile(%q, %q) = %q, want %q", tc.configured, tc.label, got, tc.want)
			}
		})
	}
}

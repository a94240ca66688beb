package plugin

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// buildConfig is a configuration whose early build steps succeed without a cluster: the
// kubeconfig names a server that is never contacted.
func buildConfig(t *testing.T) Config {
	t.Helper()
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(t, os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600))
	return Config{
		NodeName: testNode, DriverName: testDriver, SysfsRoot: "/sys",
		PluginsDir: filepath.Join(dir, "plugins"), CDIRoot: filepath.Join(dir, "cdi"),
		KubeClient:   cliflags.KubeClient{Kubeconfig: kubeconfig, QPS: 5, Burst: 10},
		StatusAPIQPS: 5, StatusAPIBurst: 10,
		HookInstallDir: filepath.Join(dir, "bin"),
	}
}

// TestBuildNamesTheFailingStep: build stops at the first step that fails, and its error
// names that step and wraps the cause.
func TestBuildNamesTheFailingStep(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, cfg *Config)
		want   string
		is     error
		// dataDir is whether the data directory exists after the failure.
		dataDir bool
	}{
		{
			name:   "missing kubeconfig",
			change: func(t *testing.T, cfg *Config) { cfg.KubeClient.Kubeconfig = filepath.Join(t.TempDir(), "none") },
			want:   "create API clients: ",
		},
		{
			name:   "missing node configuration",
			change: func(t *testing.T, cfg *Config) { cfg.NodeConfig = filepath.Join(t.TempDir(), "none.yaml") },
			want:   "load node configuration: ",
			is:     fs.ErrNotExist,
		},
		{
			name: "plugins directory is a file",
			change: func(t *testing.T, cfg *Config) {
				cfg.PluginsDir = filepath.Join(t.TempDir(), "file")
				must(t, os.WriteFile(cfg.PluginsDir, nil, 0o600))
			},
			want: "create plugin data directory: ",
		},
		{
			name:    "missing hook binary named by --hook-source",
			change:  func(t *testing.T, cfg *Config) { cfg.HookSource = filepath.Join(t.TempDir(), "none") },
			want:    "install memlock hook: ",
			is:      fs.ErrNotExist,
			dataDir: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg := buildConfig(t)
			tc.change(t, &cfg)
			err := newComponents(cfg, func(error) {}).build(ctx)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("build: %v, want an error starting with %q", err, tc.want)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("build: %v, want it to wrap %v", err, tc.is)
			}
			if _, statErr := os.Stat(cfg.DataDir()); (statErr == nil) != tc.dataDir {
				t.Errorf("data directory after the failure: %v, want it there: %v", statErr, tc.dataDir)
			}
		})
	}
}

// TestBuildNetwork: the network attachment is off with the reason, or on with static
// addresses reserved in the plugin's namespace when it has one.
func TestBuildNetwork(t *testing.T) {
	for _, tc := range []struct {
		name      string
		on        bool
		namespace string
		wantOff   string
		wantLease bool
	}{
		{name: "off", wantOff: "the plugin runs with --network-attachment=false"},
		{name: "on without a namespace", on: true},
		{name: "on in a namespace", on: true, namespace: "rdma-dra", wantLease: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			cfg := Config{NodeName: testNode, DriverName: testDriver, SysfsRoot: "/sys", PluginsDir: t.TempDir(),
				NetworkAttachment: tc.on, RDMAKernel: RDMAKernelSysfs, NRISocket: filepath.Join(t.TempDir(), "nri.sock"), Namespace: tc.namespace}
			c := newComponents(cfg, func(error) {})
			c.kube = fake.NewClientset()
			must(t, c.buildNetwork(ctx))
			if c.networkOff != tc.wantOff || (c.network == nil) != (tc.wantOff != "") {
				t.Fatalf("network %v, off %q; want off %q", c.network, c.networkOff, tc.wantOff)
			}
			if c.network == nil {
				return
			}
			r := c.network.Addresses
			if got := r != nil; got != tc.wantLease {
				t.Fatalf("addresses %v, want leases: %v", r, tc.wantLease)
			}
			if r != nil && (r.Namespace != tc.namespace || r.Node != testNode || r.Kube != c.kube) {
				t.Errorf("leases in %q for %q, want %q for %q with the plugin's client", r.Namespace, r.Node, tc.namespace, testNode)
			}
		})
	}
}

// TestBuildFabric: only a node configuration that enables fabric readiness gets the
// checker and the gate (then the plugin watches claims).
func TestBuildFabric(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		c := newComponents(Config{NodeName: testNode, DriverName: testDriver, SysfsRoot: "/sys"}, func(error) {})
		c.nodeCfg = nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Enabled: enabled}}
		c.kube, c.statusKube = fake.NewClientset(), fake.NewClientset()
		must(t, c.buildFabric(t.Context()))
		if (c.fabricChecker != nil) != enabled || (c.fabricGate != nil) != enabled {
			t.Errorf("enabled %v: checker %v, gate %v", enabled, c.fabricChecker, c.fabricGate)
		}
	}
}

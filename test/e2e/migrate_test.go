package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// sharedDevPluginConfig is a k8s-rdma-shared-dev-plugin config.json as an operator of the
// mock node could have written it: one resource for the rail netdevs ibp24s0 (mlx5_0, IB)
// and enp168s0f0np0 (mlx5_8, RoCE), narrowed to InfiniBand, so that it means mlx5_0 only,
// shared by at most two pods.
const sharedDevPluginConfig = `{
  "periodicUpdateInterval": 300,
  "configList": [{
    "resourceName": "hca_shared_devices_b",
    "rdmaHcaMax": 2,
    "selectors": {
      "vendors": ["15b3"],
      "deviceIDs": ["1021"],
      "drivers": ["mlx5_core"],
      "ifNames": ["ibp24s0", "enp168s0f0np0"],
      "linkTypes": ["infiniband"]
    }
  }]
}`

// TestMigratedSharedDevPluginConfig converts a shared-dev-plugin config with
// `rdma-dra migrate`, rolls out the node side it writes (--values-out, over the suite's
// values), proves it with --dry-run-against-cluster, applies the pools it prints and runs
// unchanged pods that ask for the plugin's resource in their limits: each gets the unit the
// plugin gave, the HCA the old selectors meant, and the third waits (rdmaHcaMax 2),
// although other ports (the RoCE one the ifNames named among them) have shares free.
func TestMigratedSharedDevPluginConfig(t *testing.T) {
	env.NeedMockNode(t)
	requireFeature(t, serverFeatures(t).ExtendedResource, "DRAExtendedResource", "a DeviceClass's extendedResourceName")
	const pool, resource = "hca-shared-devices-b", "rdma/hca_shared_devices_b"
	ctx := framework.Context(t, 10*time.Minute)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(sharedDevPluginConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	values := filepath.Join(dir, "values-migrated.yaml")
	pools, notes, err := env.RdmaDra(ctx, "migrate", "--from-shared-dev-plugin", config,
		"--chart-values", env.E2EValuesFile(), "--values-out", values, "--kubeconfig", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rdma-dra migrate printed:\n%s\nand noted:\n%s", pools, notes)

	t.Log("the node side first: the plugin publishes legacy-" + pool)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares); err != nil {
			t.Errorf("reinstall with the suite's values: %v", err)
		}
	})
	args := append([]string{"upgrade", "--install", framework.Release, env.ChartDir(), "--namespace", framework.Namespace}, env.ValuesArgs()...)
	if _, err := env.Helm(ctx, append(args, "--values", values)...); err != nil {
		t.Fatal(err)
	}
	if err := env.WaitRollout(ctx); err != nil {
		t.Fatal(err)
	}
	if err := framework.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		_, err := env.SliceDevice(ctx, "legacy-"+pool)
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// No device plugin runs on the local cluster: the node does not advertise the
	// resource, so the pool would serve it where the plugin did not. That is a widening,
	// exit status 3, and the row says so.
	rows, _, err := env.RdmaDra(ctx, "migrate", "--from-shared-dev-plugin", config, "--chart-values", env.E2EValuesFile(),
		"--dry-run-against-cluster", "--kubeconfig", env.Kubeconfig, "--node-selector", "kubernetes.io/hostname="+env.Node)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Errorf("dry run against the cluster: %v, want exit status 3", err)
	}
	if want := "WIDER: the device plugin advertises no " + resource + " here and the pool would serve 2 units of 1 ports"; !strings.Contains(rows, want) {
		t.Errorf("dry run against the cluster printed:\n%s\nwant a row with %q", rows, want)
	}

	poolsFile := filepath.Join(dir, "pools.yaml")
	if err := os.WriteFile(poolsFile, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	deletePoolOnCleanup(t, pool)
	if _, err := env.Kubectl(ctx, "apply", "-f", poolsFile); err != nil {
		t.Fatal(err)
	}
	p := env.WaitPoolStatus(t, pool, framework.PoolCounts{Ports: 1, Shares: 2, Free: 2})
	if _, err := env.PoolClass(ctx, p); err != nil {
		t.Fatal(err)
	}

	ns := env.NewNamespace(t, "migrated")
	legacy := func(name string) {
		env.CreatePod(t, framework.WithExtendedResource(framework.ReportPod(ns, name, ""), resource, 1))
	}
	for _, name := range []string{"legacy-a", "legacy-b"} {
		legacy(name)
	}
	for _, name := range []string{"legacy-a", "legacy-b"} {
		assertSees(t, name, env.WaitReport(t, ns, name), want{ibdevs: []string{"mlx5_0"}})
		assertAllocated(t, ns, name, "container-0-request-0=legacy-"+pool)
	}
	env.WaitPoolStatus(t, pool, framework.PoolCounts{Ports: 1, Shares: 2, AllocatedPorts: 1, AllocatedShares: 2, Allocated: 2})
	legacy("legacy-c")
	env.StaysPending(t, ns, "legacy-c", pendingFor)
}

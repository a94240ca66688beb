package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// sharedDevPluginConfig is a k8s-rdma-shared-dev-plugin config.json as an operator of the
// mock node could have written it: one resource for the rail netdevs ibp24s0 (mlx5_0, IB)
// and enp168s0f0np0 (mlx5_8, RoCE), narrowed to InfiniBand, so that it means mlx5_0 only.
const sharedDevPluginConfig = `{
  "periodicUpdateInterval": 300,
  "configList": [{
    "resourceName": "hca_shared_devices_b",
    "rdmaHcaMax": 500,
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
// `rdma-dra migrate`, applies the pools it prints, and runs unchanged pods that ask for
// the plugin's resource in their limits: they get shares of the HCA the old selectors
// meant, and once its shares are out the next one waits, although other ports (the RoCE
// one the ifNames named among them) have shares free.
func TestMigratedSharedDevPluginConfig(t *testing.T) {
	env.NeedMockNode(t)
	const pool, resource = "hca-shared-devices-b", "rdma/hca_shared_devices_b"
	ctx := framework.Context(t, 5*time.Minute)
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	if err := os.WriteFile(config, []byte(sharedDevPluginConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	pools, notes, err := env.RdmaDra(ctx, "migrate", "--from-shared-dev-plugin", config)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rdma-dra migrate printed:\n%s\nand noted:\n%s", pools, notes)
	poolsFile := filepath.Join(dir, "pools.yaml")
	if err := os.WriteFile(poolsFile, []byte(pools), 0o644); err != nil {
		t.Fatal(err)
	}
	deletePoolOnCleanup(t, pool)
	if _, err := env.Kubectl(ctx, "apply", "-f", poolsFile); err != nil {
		t.Fatal(err)
	}
	p := env.WaitPoolStatus(t, pool, framework.PoolCounts{Ports: 1, Shares: shares, Free: shares})
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
		assertAllocated(t, ns, name, "container-0-request-0=mlx5-0-p1-shared")
	}
	env.WaitPoolStatus(t, pool, framework.PoolCounts{Ports: 1, Shares: shares, AllocatedPorts: 1, AllocatedShares: shares, Allocated: shares})
	legacy("legacy-c")
	env.StaysPending(t, ns, "legacy-c", pendingFor)
}

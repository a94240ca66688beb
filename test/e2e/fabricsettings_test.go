package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestFabricSettings: an admin's pool sets the fabric settings of its ports and grants a
// claim one of them; the pod gets NCCL's and UCX's variables, the P_Key as its index in
// the ports' table, and an NCCL topology file of its own devices. A claim that asks for
// what the pool does not grant is refused at admission.
func TestFabricSettings(t *testing.T) {
	env.NeedMockNode(t)
	ctx := framework.Context(t, 5*time.Minute)

	// The partition sits at index 1 of both ports' tables, so that the index NCCL gets
	// is not the default 0 by chance.
	for _, dev := range []string{"mlx5_2", "mlx5_3"} {
		if err := env.SetPKey(dev, 1, 1, "0x8001"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.RemovePKey(dev, 1, 1); err != nil {
				t.Errorf("restore the P_Key table of %s: %v", dev, err)
			}
		})
	}
	const pool = "fabric-ib"
	env.CreateConfigPool(t, pool, "exclusive", `{"fabric":{"trafficClass":106,"serviceLevel":3,"adaptiveRouting":true,"qpsPerConnection":4,"pkey":"0x8001"},`+
		`"allowedFabric":{"serviceLevels":[0,3,5]}}`)
	ns := env.NewNamespace(t, "fabric")
	pair := []framework.Request{{Name: "rails", Class: pool, Count: 2,
		CEL: `device.attributes["rdma.dra.io"].ibdev in ["mlx5_2", "mlx5_3"]`}}

	t.Run("the pool's settings and the granted narrowing reach the pod", func(t *testing.T) {
		env.CreateClaimTemplate(t, ns, "train", framework.ClaimSpec(pair, "",
			framework.OpaqueConfig(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":{"serviceLevel":5,"topologyFile":true}}`)))
		env.CreatePod(t, framework.ReportPod(ns, "train", "train"))
		r := env.WaitReport(t, ns, "train")
		for k, v := range map[string]string{
			"NCCL_IB_TC": "106", "UCX_IB_TRAFFIC_CLASS": "106",
			"NCCL_IB_SL": "5", "UCX_IB_SL": "5",
			"NCCL_IB_ADAPTIVE_ROUTING": "1", "UCX_IB_AR_ENABLE": "y",
			"NCCL_IB_QPS_PER_CONNECTION": "4",
			"NCCL_IB_PKEY":               "1",
		} {
			if got := r.Env[k]; got != v {
				t.Errorf("%s: %s=%q, want %q\n%s", framework.DriverFault, k, got, v, r.Raw)
			}
		}
		// RoCE-only settings stay away from InfiniBand ports.
		for _, k := range []string{"NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ADDR_FAMILY", "NCCL_IB_GID_INDEX"} {
			if v, ok := r.Env[k]; ok {
				t.Errorf("%s: %s=%q on InfiniBand ports\n%s", framework.DriverFault, k, v, r.Raw)
			}
		}
		path := r.Env["NCCL_TOPO_FILE"]
		if path == "" {
			t.Fatalf("%s: no NCCL_TOPO_FILE\n%s", framework.DriverFault, r.Raw)
		}
		xml, err := env.Exec(ctx, ns, "train", "cat", path)
		if err != nil {
			t.Fatalf("read %s in the pod: %v", path, err)
		}
		for _, want := range []string{`<system version="1">`, `name="mlx5_2"`, `name="mlx5_3"`} {
			if !strings.Contains(xml, want) {
				t.Errorf("%s: the topology file lacks %s:\n%s", framework.DriverFault, want, xml)
			}
		}
		if strings.Contains(xml, `name="mlx5_4"`) {
			t.Errorf("%s: the topology file names a port the claim did not get:\n%s", framework.DriverFault, xml)
		}
		env.DeletePod(t, ns, "train")
	})

	t.Run("the webhook refuses what the pool does not grant", func(t *testing.T) {
		spec := framework.ClaimSpec(pair, "",
			framework.OpaqueConfig(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":{"serviceLevel":7}}`))
		if err := env.ExpectTemplateRefused(ctx, 2*time.Minute, ns, "sl7", spec, "fabric.serviceLevel"); err != nil {
			t.Fatal(err)
		}
		spec = framework.ClaimSpec(pair, "",
			framework.OpaqueConfig(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","fabric":{"trafficClass":0}}`))
		if err := env.ExpectTemplateRefused(ctx, 2*time.Minute, ns, "tc0", spec, "fabric.trafficClass"); err != nil {
			t.Fatal(err)
		}
	})
}

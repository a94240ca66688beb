package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// The dgx-h100 mock node: 8 InfiniBand ports and 2 RoCE ports, one port per device.
const nodePorts = 10

// idle is the status of a default pool on the mock node with nothing allocated.
var idle = map[string]framework.PoolCounts{
	classShared:    {Ports: nodePorts, Shares: nodePorts * shares, Free: nodePorts * shares},
	classExclusive: {Ports: nodePorts, Free: nodePorts},
}

// TestDefaultPoolsAreDeviceClasses: the chart's two RdmaPools are Ready with the node's
// ports counted, and each has a DeviceClass of its name that the controller owns, with
// the CEL that pkg/controller generates for the pool.
func TestDefaultPoolsAreDeviceClasses(t *testing.T) {
	env.NeedMockNode(t)
	ctx := framework.Context(t, 2*time.Minute)
	for _, name := range []string{classShared, classExclusive} {
		pool := env.WaitPoolStatus(t, name, idle[name])
		if _, err := env.PoolClass(ctx, pool); err != nil {
			t.Error(err)
		}
	}
}

// TestPoolLifecycle: a new exclusive pool (InfiniBand ports whose netdev matches a
// pattern) becomes a DeviceClass; a pod allocates through it and sees exactly the
// pool's ports; the status of it and of the default pools follows the allocations (a
// port held in one mode is not free in the other) as pods come and go; deleting the
// pool removes the class.
func TestPoolLifecycle(t *testing.T) {
	env.NeedMockNode(t)
	const name = "e2e-ib-pair"
	ctx := framework.Context(t, 5*time.Minute)
	// ibp154s0 (mlx5_4) and ibp192s0 (mlx5_5); the RoCE netdevs are enp168s0f*.
	env.CreatePool(t, &v1alpha1.RdmaPool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeExclusive, Selectors: v1alpha1.PoolSelectors{
			LinkTypes: []v1alpha1.LinkType{"IB"}, IfNames: []string{"ibp1[59]*"},
		}},
	})
	pool := env.WaitPoolStatus(t, name, framework.PoolCounts{Ports: 2, Free: 2})
	if _, err := env.PoolClass(ctx, pool); err != nil {
		t.Fatal(err)
	}

	ns := env.NewNamespace(t, "pool")
	env.CreateClaimTemplate(t, ns, "pair", framework.ClaimSpec([]framework.Request{{Name: "ports", Class: name, Count: 2}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "pair", "pair"))
	r := env.WaitReport(t, ns, "pair")
	var ibdevs []string
	for _, res := range env.PodClaim(t, ns, "pair").Status.Allocation.Devices.Results {
		dev, err := env.SliceDevice(ctx, res.Device)
		if err != nil {
			t.Fatal(err)
		}
		ibdevs = append(ibdevs, *sliceAttr(dev, "ibdev").StringValue)
	}
	if got := slices.Sorted(slices.Values(ibdevs)); !slices.Equal(got, []string{"mlx5_4", "mlx5_5"}) {
		t.Fatalf("pool %s allocated %v, want mlx5_4 and mlx5_5", name, ibdevs)
	}
	assertSees(t, "pair", r, want{ibdevs: ibdevs})

	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_0"), Shares: 1}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "sharer", "share"))
	assertSees(t, "sharer", env.WaitReport(t, ns, "sharer"), want{ibdevs: []string{"mlx5_0"}})

	t.Log("two ports held whole through the new pool, one share of a third port")
	env.WaitPoolStatus(t, name, framework.PoolCounts{Ports: 2, AllocatedPorts: 2, Allocated: 2})
	// The exclusive devices of mlx5_4/5 are the default exclusive pool's as well;
	// mlx5_0 is not free whole while a share of it is out.
	env.WaitPoolStatus(t, classExclusive, framework.PoolCounts{Ports: nodePorts, AllocatedPorts: 2, Allocated: 2, Free: nodePorts - 3})
	// Neither are the shares of the ports held whole.
	env.WaitPoolStatus(t, classShared, framework.PoolCounts{Ports: nodePorts, Shares: nodePorts * shares,
		AllocatedPorts: 1, AllocatedShares: 1, Allocated: 1, Free: nodePorts*shares - 2*shares - 1})

	t.Log("released again")
	env.DeletePod(t, ns, "pair")
	env.DeletePod(t, ns, "sharer")
	env.WaitPoolStatus(t, name, framework.PoolCounts{Ports: 2, Free: 2})
	for _, p := range []string{classShared, classExclusive} {
		env.WaitPoolStatus(t, p, idle[p])
	}

	t.Log("deleting the pool removes its DeviceClass")
	if err := env.DeletePool(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := env.GetPool(ctx, classExclusive); err != nil {
		t.Errorf("default pool: %v", err)
	}
}

// deletePoolOnCleanup deletes a pool created outside CreatePool when the test ends.
func deletePoolOnCleanup(t *testing.T, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := env.DeletePool(ctx, name); err != nil {
			t.Errorf("delete RdmaPool %s: %v", name, err)
		}
	})
}

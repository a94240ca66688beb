package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

const (
	classShared    = "rdma-shared"
	classExclusive = "rdma-exclusive"
	// pendingFor is how long a pod must stay unscheduled to count as Pending.
	pendingFor = 8 * time.Second
)

func TestExclusivePort(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "exclusive")
	env.CreateClaimTemplate(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort("mlx5_2")}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "whole", "whole"))
	assertSees(t, "whole", env.WaitReport(t, ns, "whole"), want{ibdevs: []string{"mlx5_2"}})
	assertAllocated(t, ns, "whole", "hca=mlx5-2-p1")

	// The port is taken whole: neither another exclusive claim nor a share gets it.
	env.CreatePod(t, framework.ReportPod(ns, "second-whole", "whole"))
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_2")}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "share", "share"))
	env.StaysPending(t, ns, "second-whole", pendingFor)
	env.StaysPending(t, ns, "share", 0)
}

// TestSharesAndExclusive walks one port (2 shares) through every transition: two pods
// share it, a third share waits, an exclusive request waits while shares are out and runs
// when they are released, and a share waits while the port is held whole.
func TestSharesAndExclusive(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "shares")
	port := "mlx5_3"
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(port), Shares: 1}}, ""))
	env.CreateClaimTemplate(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort(port)}}, ""))

	for i := 0; i < shares; i++ {
		name := fmt.Sprintf("sharer-%d", i)
		env.CreatePod(t, framework.ReportPod(ns, name, "share"))
	}
	for i := 0; i < shares; i++ {
		name := fmt.Sprintf("sharer-%d", i)
		assertSees(t, name, env.WaitReport(t, ns, name), want{ibdevs: []string{port}})
		assertAllocated(t, ns, name, "hca=mlx5-3-p1-shared")
	}

	t.Log("a share beyond the port's shares stays Pending")
	env.CreatePod(t, framework.ReportPod(ns, "one-too-many", "share"))
	env.StaysPending(t, ns, "one-too-many", pendingFor)

	t.Log("an exclusive request waits while shares are out")
	env.CreatePod(t, framework.ReportPod(ns, "whole", "whole"))
	env.StaysPending(t, ns, "whole", pendingFor)
	env.DeletePod(t, ns, "one-too-many")
	for i := 0; i < shares; i++ {
		env.DeletePod(t, ns, fmt.Sprintf("sharer-%d", i))
	}
	t.Log("... and runs once they are released")
	assertSees(t, "whole", env.WaitReport(t, ns, "whole"), want{ibdevs: []string{port}})
	assertAllocated(t, ns, "whole", "hca=mlx5-3-p1")

	t.Log("the other way round: a share waits while the port is held whole")
	env.CreatePod(t, framework.ReportPod(ns, "late-sharer", "share"))
	env.StaysPending(t, ns, "late-sharer", pendingFor)
	env.DeletePod(t, ns, "whole")
	assertSees(t, "late-sharer", env.WaitReport(t, ns, "late-sharer"), want{ibdevs: []string{port}})
}

// TestOneClaimTwoPods shares one claim (one share) between two pods.
func TestOneClaimTwoPods(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "oneclaim")
	ctx := framework.Context(t, time.Minute)
	claim := env.CreateClaim(t, ns, "port-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_1")}}, ""))
	for _, name := range []string{"reader-a", "reader-b"} {
		env.CreatePod(t, framework.WithClaim(framework.ReportPod(ns, name, ""), claim))
	}
	for _, name := range []string{"reader-a", "reader-b"} {
		assertSees(t, name, env.WaitReport(t, ns, name), want{ibdevs: []string{"mlx5_1"}})
	}
	c, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Status.ReservedFor) != 2 {
		t.Errorf("claim reserved for %d pods, want 2", len(c.Status.ReservedFor))
	}
}

// TestPreferExclusiveFallback uses firstAvailable: a whole port if one is free, else a share.
func TestPreferExclusiveFallback(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "fallback")
	prefer := func(port string) []framework.Request {
		return []framework.Request{{Name: "hca", FirstAvailable: []framework.Request{
			{Name: "whole", Class: classExclusive, CEL: framework.OnPort(port)},
			{Name: "share", Class: classShared, CEL: framework.OnPort(port), Shares: 1},
		}}}
	}
	env.CreateClaimTemplate(t, ns, "prefer-free", framework.ClaimSpec(prefer("mlx5_5"), ""))
	env.CreateClaimTemplate(t, ns, "prefer-busy", framework.ClaimSpec(prefer("mlx5_4"), ""))
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_4"), Shares: 1}}, ""))

	env.CreatePod(t, framework.ReportPod(ns, "on-free-port", "prefer-free"))
	assertSees(t, "on-free-port", env.WaitReport(t, ns, "on-free-port"), want{ibdevs: []string{"mlx5_5"}})
	assertAllocated(t, ns, "on-free-port", "hca/whole=mlx5-5-p1")

	// A share holds mlx5_4, so the whole port is not available: the pod gets a share.
	env.CreatePod(t, framework.ReportPod(ns, "sharer", "share"))
	env.WaitReport(t, ns, "sharer")
	env.CreatePod(t, framework.ReportPod(ns, "on-busy-port", "prefer-busy"))
	assertSees(t, "on-busy-port", env.WaitReport(t, ns, "on-busy-port"), want{ibdevs: []string{"mlx5_4"}})
	assertAllocated(t, ns, "on-busy-port", "hca/share=mlx5-4-p1-shared")
}

// legacyClass is the local cluster's legacy pool (pools.legacy): one unit of
// rdma/hca_shared_devices_a is every InfiniBand port of the node, for at most
// localcluster.LegacyMaxPods (2) pods at once.
const legacyClass, legacyResource = "hca-shared-devices-a", "rdma/hca_shared_devices_a"

// ibRails are the InfiniBand ports of the dgx-h100 mock node, the rails a pod of the
// device plugin's unit gets.
var ibRails = []string{"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7"}

// TestLegacyExtendedResource runs unchanged device-plugin-era pods: one unit gives every
// rail, as k8s-rdma-shared-dev-plugin did; the third pod waits (maxPods 2). While legacy
// pods hold the rails a whole-port claim on one of them waits, a share of it and a whole
// RoCE port do not; once they (and the share) are gone the whole port is allocated, and
// then a new legacy pod waits for it.
func TestLegacyExtendedResource(t *testing.T) {
	env.NeedMockNode(t)
	// The API server drops extendedResourceName when DRAExtendedResource is off, as it is
	// by default before 1.36 (the version matrix runs this test there too).
	requireFeature(t, serverFeatures(t).ExtendedResource, "DRAExtendedResource", "a DeviceClass's extendedResourceName")
	ctx := framework.Context(t, 10*time.Minute)
	dc, err := env.Client.ResourceV1().DeviceClasses().Get(ctx, legacyClass, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if dc.Spec.ExtendedResourceName == nil || *dc.Spec.ExtendedResourceName != legacyResource {
		t.Fatalf("DeviceClass %s has extendedResourceName %v; is the DRAExtendedResource feature on?", legacyClass, dc.Spec.ExtendedResourceName)
	}
	ns := env.NewNamespace(t, "legacy")
	legacy := func(name string) {
		env.CreatePod(t, framework.WithExtendedResource(framework.ReportPod(ns, name, ""), legacyResource, 1))
	}
	const device = "container-0-request-0=legacy-hca-shared-devices-a"

	t.Log("one unit is every rail, for two pods")
	// One after the other: a second pod tried while the first one's allocation is still
	// in flight can be found unschedulable, and the scheduler does not retry it on the
	// first claim's events (its claims come from extended resources, so it names none),
	// only at its periodic retry of unschedulable pods, 5 minutes later
	// (docs/migration.md, "One unit, before and after").
	for _, name := range []string{"legacy-a", "legacy-b"} {
		legacy(name)
		assertSees(t, name, env.WaitReport(t, ns, name), want{ibdevs: ibRails})
		assertAllocated(t, ns, name, device)
	}
	t.Log("a third pod is one more than maxPods")
	legacy("legacy-c")
	env.StaysPending(t, ns, "legacy-c", pendingFor)
	pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, "legacy-c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reason := ""
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			reason = c.Reason + ": " + c.Message
		}
	}
	if !strings.HasPrefix(reason, corev1.PodReasonUnschedulable+": ") || len(reason) == len(corev1.PodReasonUnschedulable)+2 {
		t.Errorf("legacy-c is Pending with %q, want the scheduler's reason (Unschedulable and a message)", reason)
	}
	t.Logf("legacy-c is Pending: %s", reason)

	t.Log("with legacy pods on the rails: a whole rail waits, a share of it and a whole RoCE port do not")
	env.CreateClaimTemplate(t, ns, "whole-rail", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort("mlx5_2")}}, ""))
	env.CreateClaimTemplate(t, ns, "rail-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_2"), Shares: 1}}, ""))
	env.CreateClaimTemplate(t, ns, "whole-roce", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort("mlx5_8")}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "whole-rail", "whole-rail"))
	env.StaysPending(t, ns, "whole-rail", pendingFor)
	for _, name := range []string{"rail-share", "whole-roce"} {
		env.CreatePod(t, framework.ReportPod(ns, name, name))
	}
	env.WaitReport(t, ns, "rail-share")
	assertAllocated(t, ns, "rail-share", "hca=mlx5-2-p1-shared")
	env.WaitReport(t, ns, "whole-roce")
	assertAllocated(t, ns, "whole-roce", "hca=mlx5-8-p1")

	t.Log("once the legacy pods and the share are gone, the waiting whole rail is allocated; then a legacy pod waits for it")
	for _, name := range []string{"legacy-a", "legacy-b", "legacy-c", "rail-share"} {
		env.DeletePod(t, ns, name)
	}
	env.WaitReport(t, ns, "whole-rail")
	assertAllocated(t, ns, "whole-rail", "hca=mlx5-2-p1")
	legacy("legacy-d")
	env.StaysPending(t, ns, "legacy-d", pendingFor)
	env.DeletePod(t, ns, "whole-rail")
	assertSees(t, "legacy-d", env.WaitReport(t, ns, "legacy-d"), want{ibdevs: ibRails})
}

// TestNUMAAlignment asks for two whole InfiniBand ports on one NUMA node.
func TestNUMAAlignment(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "numa")
	ctx := framework.Context(t, time.Minute)
	env.CreateClaimTemplate(t, ns, "pair", framework.ClaimSpec([]framework.Request{{
		Name: "ports", Class: classExclusive, Count: 2,
		CEL: `device.attributes["rdma.dra.io"].link_layer == "InfiniBand"`,
	}}, "rdma.dra.io/numa_node"))
	env.CreatePod(t, framework.ReportPod(ns, "pair", "pair"))
	r := env.WaitReport(t, ns, "pair")
	claim := env.PodClaim(t, ns, "pair")
	var ibdevs []string
	numa := map[int64]bool{}
	for _, res := range claim.Status.Allocation.Devices.Results {
		dev, err := env.SliceDevice(ctx, res.Device)
		if err != nil {
			t.Fatal(err)
		}
		ibdevs = append(ibdevs, *sliceAttr(dev, "ibdev").StringValue)
		numa[*sliceAttr(dev, "numa_node").IntValue] = true
	}
	if len(ibdevs) != 2 || len(numa) != 1 {
		t.Fatalf("allocated %v on NUMA nodes %v; want two ports on one node", ibdevs, numa)
	}
	assertSees(t, "pair", r, want{ibdevs: ibdevs})
}

// TestPCIeRootAlignment asks for two whole ports behind one PCIe root: on the dgx-h100 mock
// only the two RoCE ports of mlx5_8/mlx5_9 share one (pci0000:a7), with GID index 3.
func TestPCIeRootAlignment(t *testing.T) {
	env.NeedMockNode(t)
	ns := env.NewNamespace(t, "pcieroot")
	env.CreateClaimTemplate(t, ns, "pair", framework.ClaimSpec([]framework.Request{{Name: "ports", Class: classExclusive, Count: 2}},
		"resource.kubernetes.io/pcieRoot"))
	env.CreatePod(t, framework.ReportPod(ns, "pair", "pair"))
	assertSees(t, "pair", env.WaitReport(t, ns, "pair"), want{ibdevs: []string{"mlx5_8", "mlx5_9"}, gidIndex: "3"})
	assertAllocated(t, ns, "pair", "ports=mlx5-8-p1", "ports=mlx5-9-p1")
}

// sliceAttr returns an attribute of a published device by its name in the rdma.dra.io
// domain, however the slice spells it.
func sliceAttr(dev resourceapi.Device, id string) resourceapi.DeviceAttribute {
	v, _ := devicemodel.LookupAttribute(devicemodel.DefaultDriverName, &dev, resourceapi.QualifiedName(devicemodel.AttributeDomain+"/"+id))
	return v
}

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// fabricTimeout is the fabric readiness timeout the test installs: long enough for a
// wait the test watches, short enough that a port that stays down makes a failed binding
// within the test.
const fabricTimeout = 30 * time.Second

// TestVersionFabricReadiness: with nodeConfig.fabricReadiness gating mlx5_3, a pod whose
// claim gets that port is bound only once the port is ready for traffic (docs/kubelet-
// plugin.md, Fabric readiness). Where the API server keeps binding conditions (1.36+,
// on by default) the pod waits unbound, its claim allocated and reserved, while the
// plugin says why in the claim's status; a port that stays down past the timeout fails
// the binding with the plugin's message in the scheduler's event. Where it drops them
// (1.34, 1.35) the pod is bound and prepare fails with the same message until the port is
// ready. Two ways for a port not to be ready, each repaired in the mock sysfs:
//
//   - the claim names a P_Key (network.pkey, granted by the pool e2e-fabric) that is not
//     in the port's table: the test adds it, as a subnet manager would;
//   - the port is DOWN, and the claim tolerates the taint rdma.dra.io/port-not-active (a
//     claim that does not is not allocated the port at all): the test brings it up.
//
// The pods use shares of the port, which both device models publish.
func TestVersionFabricReadiness(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's state and P_Key table in the mock sysfs")
	f := serverFeatures(t)
	if !f.BindingConditions && f.DefaultOn() {
		t.Fatalf("the API server (Kubernetes %s) drops devices' binding conditions, although DRADeviceBindingConditions is on by default from 1.36: is the gate turned off?", f.Version)
	}
	const port = "mlx5_3"
	ctx := framework.Context(t, 20*time.Minute)
	if err := env.Install(ctx, shares,
		"nodeConfig.fabricReadiness.enabled=true",
		"nodeConfig.fabricReadiness.include[0].ibdevs[0]="+port,
		fmt.Sprintf("nodeConfig.fabricReadiness.timeoutSeconds=%d", int(fabricTimeout.Seconds()))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Install(context.Background(), shares); err != nil {
			t.Errorf("reinstall without fabric readiness: %v", err)
		}
	})
	checkGatedSlices(t, ctx, f, port)

	pool := netPool(t, "e2e-fabric", v1alpha1.PoolModeShared, map[string]any{"allowedNetwork": map[string]any{"pkeys": []string{"0x8002"}}})
	ns := env.NewNamespace(t, "fabric")

	t.Run("missing P_Key", func(t *testing.T) {
		t.Cleanup(func() {
			if err := env.RemovePKey(port, 1, 2); err != nil {
				t.Error(err)
			}
		})
		env.CreateClaimTemplate(t, ns, "pkey", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: pool, CEL: framework.OnPort(port)}}, "",
			framework.OpaqueConfig(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"pkey":"0x8002"}}`)))
		env.CreatePod(t, framework.ReportPod(ns, "pkey", "pkey"))
		waitNotReady(t, ctx, f, ns, "pkey", "port "+port+"/1: P_Key 0x8002 not in the port's table")
		if err := env.SetPKey(port, 1, 2, "0x8002"); err != nil {
			t.Fatal(err)
		}
		assertSees(t, "pkey", env.WaitReport(t, ns, "pkey"), want{ibdevs: []string{port}})
		checkReady(t, f, ns, "pkey")
		env.DeletePod(t, ns, "pkey")
	})

	t.Run("port DOWN", func(t *testing.T) {
		devices := []string{"mlx5-3-p1", "mlx5-3-p1-shared"}
		if !f.Partitionable() {
			devices = nil
			for k := range shares {
				devices = append(devices, devicemodel.LegacyShareName("mlx5-3-p1", k))
			}
		}
		env.RestorePortOnCleanup(t, port, 1, devices...)
		if err := env.SetPortState(port, 1, framework.PortDown); err != nil {
			t.Fatal(err)
		}
		if f.DeviceTaints {
			if _, err := env.WaitTaint(ctx, time.Minute, "DOWN", devices...); err != nil {
				t.Fatalf("taint after the port went down: %v", err)
			}
		}
		spec := framework.ClaimSpec([]framework.Request{{Name: "hca", Class: pool, CEL: framework.OnPort(port)}}, "")
		// It wants this port, down or not, and waits for it (until the timeout: then the
		// scheduler tries again).
		spec.Devices.Requests[0].Exactly.Tolerations = []resourceapi.DeviceToleration{{Key: framework.PortNotActiveTaint, Operator: resourceapi.DeviceTolerationOpExists}}
		env.CreateClaimTemplate(t, ns, "down", spec)
		env.CreatePod(t, framework.ReportPod(ns, "down", "down"))
		why := "port " + port + "/1 is DOWN"
		waitNotReady(t, ctx, f, ns, "down", why)
		if f.BindingConditions {
			// The port stays down past the timeout: the plugin fails the binding with what
			// was missing, and the scheduler says so in the pod's events, then tries again.
			waitPodEvent(t, ctx, ns, "down", fabricTimeout+2*time.Minute, "FailedScheduling", "FabricNotReadyInTime", why)
			if p, err := env.Client.CoreV1().Pods(ns).Get(ctx, "down", metav1.GetOptions{}); err != nil {
				t.Fatal(err)
			} else if p.Spec.NodeName != "" {
				env.FailPod(t, ns, "down", fmt.Errorf("bound to %s while its port was DOWN", p.Spec.NodeName))
			}
		}
		if err := env.SetPortState(port, 1, framework.PortActive); err != nil {
			t.Fatal(err)
		}
		assertSees(t, "down", env.WaitReport(t, ns, "down"), want{ibdevs: []string{port}})
		checkReady(t, f, ns, "down")
		env.DeletePod(t, ns, "down")
	})
}

// checkGatedSlices: the devices of the gated port carry the binding conditions where the
// API server keeps them, and the devices of another port do not.
func checkGatedSlices(t *testing.T, ctx context.Context, f framework.Features, port string) {
	t.Helper()
	if !f.BindingConditions {
		t.Logf("Kubernetes %s drops binding conditions: prepare holds the pods back instead", f.Version)
		return
	}
	gated, other := devicemodel.SharedDeviceName(devicemodel.DeviceName(port, 1)), devicemodel.SharedDeviceName(devicemodel.DeviceName("mlx5_4", 1))
	if !f.Partitionable() {
		gated, other = devicemodel.LegacyShareName(devicemodel.DeviceName(port, 1), 0), devicemodel.LegacyShareName(devicemodel.DeviceName("mlx5_4", 1), 0)
	}
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "binding conditions in the node's slices", func(ctx context.Context) error {
		d, err := env.SliceDevice(ctx, gated)
		if err != nil {
			return err
		}
		if !slices.Equal(d.BindingConditions, []string{framework.FabricReady}) || !slices.Equal(d.BindingFailureConditions, []string{framework.FabricFailed}) {
			return fmt.Errorf("%s: bindingConditions %v, bindingFailureConditions %v", gated, d.BindingConditions, d.BindingFailureConditions)
		}
		o, err := env.SliceDevice(ctx, other)
		if err != nil {
			return err
		}
		if len(o.BindingConditions) > 0 {
			return fmt.Errorf("%s is not gated but has bindingConditions %v", other, o.BindingConditions)
		}
		return nil
	})
}

// waitNotReady waits until the pod is held back for why: unbound with its claim waiting
// for the binding conditions, or, where the API server drops them, bound with a failed
// prepare whose event says why.
func waitNotReady(t *testing.T, ctx context.Context, f framework.Features, ns, pod, why string) {
	t.Helper()
	if f.BindingConditions {
		claim, err := env.WaitHeldAtBinding(ctx, ns, pod, 2*time.Minute, why)
		if err != nil {
			env.FailPod(t, ns, pod, fmt.Errorf("pod not held at binding for %q: %w", why, err))
		}
		t.Logf("%s: unbound, claim %s allocated %v, fabric conditions %q", pod, claim.Name, framework.AllocatedDevices(claim), framework.FabricConditions(claim))
		return
	}
	waitPodEvent(t, ctx, ns, pod, 2*time.Minute, "FailedPrepareDynamicResources", "fabric not ready: "+why)
}

// waitPodEvent waits for a Warning event of the pod with reason whose message contains
// every one of parts.
func waitPodEvent(t *testing.T, ctx context.Context, ns, pod string, timeout time.Duration, reason string, parts ...string) {
	t.Helper()
	err := framework.Poll(ctx, timeout, time.Second, func(ctx context.Context) error {
		evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var seen []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Name != pod || ev.Type != corev1.EventTypeWarning || ev.Reason != reason {
				continue
			}
			if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(ev.Message, p) }) {
				return nil
			}
			seen = append(seen, ev.Message)
		}
		return fmt.Errorf("no %s event with %q; seen %q", reason, parts, seen)
	})
	if err != nil {
		env.FailPod(t, ns, pod, err)
	}
}

// checkReady: where binding conditions exist, the running pod's claim says its fabric was
// ready, also after prepare wrote its own status.
func checkReady(t *testing.T, f framework.Features, ns, pod string) {
	t.Helper()
	if !f.BindingConditions {
		return
	}
	claim := env.PodClaim(t, ns, pod)
	conds := framework.FabricConditions(claim)
	if !slices.ContainsFunc(conds, func(c string) bool { return strings.Contains(c, "FabricReady=True") }) {
		t.Errorf("%s: claim %s runs with fabric conditions %q, want FabricReady=True", pod, claim.Name, conds)
	}
}

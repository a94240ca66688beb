package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// taintWithin is the acceptance bound of port health: a port that goes down is tainted,
// and cleared when it comes back, within this long of the change on the node.
const taintWithin = 3 * time.Second

// TestPortDownTaintsAndRecovers takes a port down on the mock node while a pod holds a
// share of it: both devices of the port are tainted within taintWithin, the pod's status
// reports its device Unhealthy, the Node gets a Warning event, and a new claim that may
// use that port or another one gets the other one. Bringing the port back clears all of
// it.
func TestPortDownTaintsAndRecovers(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's state file in the mock sysfs")
	const down, other = "mlx5_6", "mlx5_7"
	devices := []string{"mlx5-6-p1", "mlx5-6-p1-shared"}
	ns := env.NewNamespace(t, "health")
	ctx := framework.Context(t, 5*time.Minute)

	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(down), Shares: 1}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "holder", "share"))
	assertSees(t, "holder", env.WaitReport(t, ns, "holder"), want{ibdevs: []string{down}})
	assertAllocated(t, ns, "holder", "hca=mlx5-6-p1-shared")
	// The kubelet shows the health of allocated devices once the plugin has streamed it.
	if _, _, err := env.WaitResourceHealth(ctx, time.Minute, ns, "holder", "toolbox", "mlx5-6-p1", corev1.ResourceHealthStatusHealthy); err != nil {
		t.Fatalf("holder's device before the port goes down: %v", err)
	}

	env.RestorePortOnCleanup(t, down, 1, devices...)
	wrote := time.Now()
	if err := env.SetPortState(down, 1, framework.PortDown); err != nil {
		t.Fatal(err)
	}
	tainted, err := env.WaitTaint(ctx, time.Minute, "DOWN", devices...)
	if err != nil {
		t.Fatalf("taint after the port went down: %v", err)
	}
	toTaint := tainted.Sub(wrote)
	t.Logf("port DOWN -> %v tainted in %v", devices, toTaint.Round(time.Millisecond))
	if toTaint > taintWithin {
		t.Errorf("devices tainted %v after the port went down, want within %v", toTaint, taintWithin)
	}
	for _, name := range devices {
		dev, err := env.SliceDevice(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if taint, _ := framework.DeviceTaint(dev, framework.PortNotActiveTaint); taint.Effect != resourceapi.DeviceTaintEffectNoSchedule {
			t.Errorf("%s: taint effect %q, want the chart's default NoSchedule", name, taint.Effect)
		}
	}
	otherDev, err := env.SliceDevice(ctx, "mlx5-7-p1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.DeviceTaint(otherDev, framework.PortNotActiveTaint); ok {
		t.Errorf("mlx5-7-p1 is tainted too: %+v", otherDev.Taints)
	}

	unhealthy, res, err := env.WaitResourceHealth(ctx, time.Minute, ns, "holder", "toolbox", "mlx5-6-p1", corev1.ResourceHealthStatusUnhealthy)
	if err != nil {
		t.Fatalf("holder's device after the port went down: %v", err)
	}
	t.Logf("port DOWN -> holder's allocatedResourcesStatus Unhealthy in %v", unhealthy.Sub(wrote).Round(time.Millisecond))
	for _, r := range res {
		if msg := ptr.Deref(r.Message, ""); !strings.Contains(msg, "mlx5_6 port 1 is DOWN") {
			t.Errorf("%s: Unhealthy message %q, want it to say mlx5_6 port 1 is DOWN", r.ResourceID, msg)
		}
	}
	waitNodeEvent(t, ctx, corev1.EventTypeWarning, "RDMAPortStateChanged", "mlx5_6 port 1: ACTIVE", "-> DOWN")

	t.Log("a claim that may use either port gets the one that is up")
	env.CreateClaimTemplate(t, ns, "either", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, Shares: 1,
		CEL: `device.attributes["rdma.dra.io"].ibdev in ["` + down + `", "` + other + `"]`}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "newcomer", "either"))
	assertSees(t, "newcomer", env.WaitReport(t, ns, "newcomer"), want{ibdevs: []string{other}})
	assertAllocated(t, ns, "newcomer", "hca=mlx5-7-p1-shared")

	wrote = time.Now()
	if err := env.SetPortState(down, 1, framework.PortActive); err != nil {
		t.Fatal(err)
	}
	cleared, err := env.WaitTaint(ctx, time.Minute, "", devices...)
	if err != nil {
		t.Fatalf("taint after the port came back: %v", err)
	}
	toClear := cleared.Sub(wrote)
	t.Logf("port ACTIVE -> taint cleared in %v", toClear.Round(time.Millisecond))
	if toClear > taintWithin {
		t.Errorf("taint cleared %v after the port came back, want within %v", toClear, taintWithin)
	}
	healthy, _, err := env.WaitResourceHealth(ctx, time.Minute, ns, "holder", "toolbox", "mlx5-6-p1", corev1.ResourceHealthStatusHealthy)
	if err != nil {
		t.Fatalf("holder's device after the port came back: %v", err)
	}
	t.Logf("port ACTIVE -> holder's allocatedResourcesStatus Healthy in %v", healthy.Sub(wrote).Round(time.Millisecond))
	waitNodeEvent(t, ctx, corev1.EventTypeNormal, "RDMAPortStateChanged", "mlx5_6 port 1: DOWN", "-> ACTIVE")
}

// waitNodeEvent waits for an event of type and reason on the node whose message
// contains every one of parts (the plugin records them, so this also proves that its
// RBAC allows it).
func waitNodeEvent(t *testing.T, ctx context.Context, eventType, reason string, parts ...string) {
	t.Helper()
	framework.Eventually(t, ctx, 30*time.Second, 500*time.Millisecond, "Node event "+reason, func(ctx context.Context) error {
		events, err := env.NodeEvents(ctx, reason)
		if err != nil {
			return err
		}
		for _, e := range events {
			if strings.HasPrefix(e, eventType+" ") && !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(e, p) }) {
				return nil
			}
		}
		return fmt.Errorf("no %s event with %q among %q", eventType, parts, events)
	})
}

// TestPortFlipLatency flips one port between DOWN and ACTIVE flips times, each time at a
// random moment of the plugin's poll interval and waiting for the change to be
// published, and logs the median and maximum time from the write on the node to the
// ResourceSlice in the API server. Damping is turned off for it (it would hold back a port
// that flaps this fast, by design); every flip must be published within taintWithin.
func TestPortFlipLatency(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's state file in the mock sysfs")
	const port, flips = "mlx5_5", 20
	devices := []string{"mlx5-5-p1", "mlx5-5-p1-shared"}
	ctx := framework.Context(t, 10*time.Minute)
	if err := env.Install(ctx, shares, "health.maxRepublishPerMinute=0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Install(context.Background(), shares); err != nil {
			t.Errorf("reinstall with the default damping: %v", err)
		}
	})
	env.RestorePortOnCleanup(t, port, 1, devices...)
	if err := env.WaitHealthWatching(ctx); err != nil {
		t.Fatal(err)
	}

	var latencies []time.Duration
	for i := range flips {
		state, taint := framework.PortDown, "DOWN"
		if i%2 == 1 {
			state, taint = framework.PortActive, ""
		}
		// The plugin polls every second: a write at a random moment of that second.
		time.Sleep(time.Duration(rand.Int64N(int64(time.Second))))
		wrote := time.Now()
		if err := env.SetPortState(port, 1, state); err != nil {
			t.Fatal(err)
		}
		seen, err := env.WaitTaint(ctx, time.Minute, taint, devices...)
		if err != nil {
			t.Fatalf("flip %d to %q: %v", i+1, state, err)
		}
		latencies = append(latencies, seen.Sub(wrote))
	}
	sorted := slices.Clone(latencies)
	slices.Sort(sorted)
	median := (sorted[flips/2-1] + sorted[flips/2]) / 2
	t.Logf("%d flips of %s, change on the node to ResourceSlice: median %v, max %v (all: %v)",
		flips, port, median.Round(time.Millisecond), sorted[flips-1].Round(time.Millisecond), roundAll(latencies))
	if sorted[flips-1] > taintWithin {
		t.Errorf("slowest flip published after %v, want within %v", sorted[flips-1], taintWithin)
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

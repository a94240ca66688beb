package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// counterFresh bounds how long a new value of a counter file takes to reach /metrics: a
// reading serves scrapes for 5 s (portcounters.DefaultMaxAge), plus the test's own
// polling.
const counterFresh = 7 * time.Second

// portSeries are the labels of a port's series, and extra.
func portSeries(ibdev string, extra map[string]string) map[string]string {
	m := map[string]string{"node": env.Node, "ibdev": ibdev, "port": "1"}
	for k, v := range extra {
		m[k] = v
	}
	return m
}

func valueIs(want float64) func(framework.Sample) error {
	return func(s framework.Sample) error {
		if s.Value != want {
			return fmt.Errorf("value %v, want %v", s.Value, want)
		}
		return nil
	}
}

func anyValue(framework.Sample) error { return nil }

// TestPortCountersServedWithTheirClaim: the plugin's /metrics serves a port's counters
// as the mock node's files hold them (data in bytes, the files count 4-byte words), and
// a new value of a file within the cache's age; the series of a port that an exclusive
// claim holds name that claim, a free port's name none, and port_claim_info lists the
// holder, until the pod and its claim are gone.
func TestPortCountersServedWithTheirClaim(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's counter files in the mock sysfs and fetch the plugin's /metrics on the node's loopback")
	const held, free = "mlx5_9", "mlx5_8"
	ns := env.NewNamespace(t, "counters")
	ctx := framework.Context(t, 5*time.Minute)

	env.CreateClaimTemplate(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort(held)}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "holder", "whole"))
	assertSees(t, "holder", env.WaitReport(t, ns, "holder"), want{ibdevs: []string{held}, gidIndex: "3"})
	claim := env.PodClaim(t, ns, "holder").Name
	holder := map[string]string{"claim_namespace": ns, "claim": claim, "link_layer": "Ethernet"}

	words, err := env.PortCounter(held, 1, framework.CountersDir, "port_xmit_data")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitMetric(ctx, time.Minute, "rdma_dra_port_transmit_bytes_total", portSeries(held, holder), valueIs(float64(words)*4)); err != nil {
		t.Fatalf("transmitted bytes of the held port: %v", err)
	}
	for _, c := range []struct{ dir, file, metric, counter string }{
		{framework.CountersDir, "link_downed", "rdma_dra_port_link_downed_total", ""},
		{framework.CountersDir, "symbol_error", "rdma_dra_port_symbol_errors_total", ""},
		{framework.HWCountersDir, "np_cnp_sent", "rdma_dra_port_hw_stat_total", "np_cnp_sent"},
		{framework.HWCountersDir, "out_of_buffer", "rdma_dra_port_hw_stat_total", "out_of_buffer"},
	} {
		v, err := env.PortCounter(held, 1, c.dir, c.file)
		if err != nil {
			t.Fatal(err)
		}
		labels := portSeries(held, holder)
		if c.counter != "" {
			labels["counter"] = c.counter
		}
		if _, err := env.WaitMetric(ctx, time.Minute, c.metric, labels, valueIs(float64(v))); err != nil {
			t.Errorf("%s/%s of the held port: %v", c.dir, c.file, err)
		}
	}
	if _, err := env.WaitMetric(ctx, time.Minute, "rdma_dra_port_claim_info", portSeries(held, map[string]string{"claim_namespace": ns, "claim": claim, "mode": "exclusive"}), valueIs(1)); err != nil {
		t.Errorf("claim info of the held port: %v", err)
	}
	if _, err := env.WaitMetric(ctx, time.Minute, "rdma_dra_port_transmit_bytes_total", portSeries(free, map[string]string{"claim_namespace": "", "claim": ""}), anyValue); err != nil {
		t.Errorf("the free port's series: %v", err)
	}

	t.Log("a new value of the file is served")
	words += 123_456_789
	wrote := time.Now()
	if err := env.SetPortCounter(held, 1, framework.CountersDir, "port_xmit_data", words); err != nil {
		t.Fatal(err)
	}
	if _, err := env.WaitMetric(ctx, time.Minute, "rdma_dra_port_transmit_bytes_total", portSeries(held, holder), valueIs(float64(words)*4)); err != nil {
		t.Fatalf("transmitted bytes after the write: %v", err)
	}
	fresh := time.Since(wrote)
	t.Logf("counter file written -> new value served in %v", fresh.Round(time.Millisecond))
	if fresh > counterFresh {
		t.Errorf("new counter value served %v after the write, want within %v", fresh, counterFresh)
	}

	t.Log("once the claim is gone, the port's series name no claim")
	env.DeletePod(t, ns, "holder")
	if _, err := env.WaitMetric(ctx, time.Minute, "rdma_dra_port_transmit_bytes_total", portSeries(held, map[string]string{"claim": ""}), valueIs(float64(words)*4)); err != nil {
		t.Errorf("the released port's series: %v", err)
	}
	framework.Eventually(t, ctx, time.Minute, 500*time.Millisecond, "no claim info of the released port", func(ctx context.Context) error {
		text, err := env.PluginMetrics(ctx)
		if err != nil {
			return err
		}
		left, err := framework.MetricSamples(text, "rdma_dra_port_claim_info", portSeries(held, nil))
		if err != nil {
			return err
		}
		if len(left) > 0 {
			return fmt.Errorf("still %+v", left)
		}
		return nil
	})
}

// TestFlappingPortTaintedAndCleared: with a short window and quiet window in the node
// configuration, link_downed rising by 2 on the mock node taints both devices of the
// port rdma.dra.io/port-flapping=LinkDowned:NoSchedule within a poll (taintWithin of the
// write) while the port stays ACTIVE and untainted otherwise, with a Warning event and
// port_flapping 1; the taint goes once the link downs have left the window and the quiet
// window has passed, with a Normal event.
func TestFlappingPortTaintedAndCleared(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's link_downed counter in the mock sysfs")
	const port, other = "mlx5_7", "mlx5_6"
	devices := []string{"mlx5-7-p1", "mlx5-7-p1-shared"}
	const window, quiet = 10 * time.Second, 5 * time.Second
	ctx := framework.Context(t, 10*time.Minute)
	if err := env.Install(ctx, shares,
		fmt.Sprintf("nodeConfig.health.flapping.windowSeconds=%d", int(window.Seconds())),
		fmt.Sprintf("nodeConfig.health.flapping.quietSeconds=%d", int(quiet.Seconds()))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Install(context.Background(), shares); err != nil {
			t.Errorf("reinstall with the default flapping thresholds: %v", err)
		}
	})
	if err := env.WaitHealthWatching(ctx); err != nil {
		t.Fatal(err)
	}

	// The plugin's first poll takes the baseline, right after it logs that it watches;
	// should the write below come before that poll, the next write is after it.
	var wrote, tainted time.Time
	for attempt := range 2 {
		v, err := env.PortCounter(port, 1, framework.CountersDir, "link_downed")
		if err != nil {
			t.Fatal(err)
		}
		wrote = time.Now()
		if err := env.SetPortCounter(port, 1, framework.CountersDir, "link_downed", v+2); err != nil {
			t.Fatal(err)
		}
		if tainted, err = env.WaitDeviceTaint(ctx, taintWithin, framework.PortFlappingTaint, "LinkDowned", devices...); err == nil {
			break
		} else if attempt == 1 {
			t.Fatalf("taint after link_downed rose by 2: %v", err)
		}
		t.Logf("not tainted within %v of the first write (%v): the plugin's first poll may have taken it as the baseline", taintWithin, err)
	}
	t.Logf("link_downed +2 -> tainted %s in %v", framework.PortFlappingTaint, tainted.Sub(wrote).Round(time.Millisecond))
	for _, name := range devices {
		dev, err := env.SliceDevice(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		if taint, _ := framework.DeviceTaint(dev, framework.PortFlappingTaint); taint.Effect != resourceapi.DeviceTaintEffectNoSchedule {
			t.Errorf("%s: flapping taint effect %q, want NoSchedule", name, taint.Effect)
		}
		if taint, ok := framework.DeviceTaint(dev, framework.PortNotActiveTaint); ok {
			t.Errorf("%s: %s=%s on an ACTIVE port", name, taint.Key, taint.Value)
		}
	}
	otherDev, err := env.SliceDevice(ctx, "mlx5-6-p1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.DeviceTaint(otherDev, framework.PortFlappingTaint); ok {
		t.Errorf("%s is tainted as flapping too: %+v", other, otherDev.Taints)
	}
	if _, err := env.WaitMetric(ctx, 30*time.Second, "rdma_dra_port_flapping", map[string]string{"device": port, "port": "1"}, valueIs(1)); err != nil {
		t.Errorf("port_flapping while tainted: %v", err)
	}
	waitNodeEvent(t, ctx, corev1.EventTypeWarning, "RDMAPortFlapping", port+" port 1 is flapping: link_downed rose by 2")

	cleared, err := env.WaitDeviceTaint(ctx, 2*time.Minute, framework.PortFlappingTaint, "", devices...)
	if err != nil {
		t.Fatalf("taint after the quiet window: %v", err)
	}
	// The link downs leave the window a window after the poll that read them, and the
	// port must then stay quiet for the quiet window: polls are a second apart.
	held := cleared.Sub(tainted)
	t.Logf("flapping taint held for %v (window %v, quiet %v)", held.Round(time.Millisecond), window, quiet)
	if lo, hi := window+quiet-2*time.Second, window+quiet+taintWithin; held < lo || held > hi {
		t.Errorf("flapping taint held for %v, want between %v and %v", held, lo, hi)
	}
	if _, err := env.WaitMetric(ctx, 30*time.Second, "rdma_dra_port_flapping", map[string]string{"device": port, "port": "1"}, valueIs(0)); err != nil {
		t.Errorf("port_flapping after the quiet window: %v", err)
	}
	waitNodeEvent(t, ctx, corev1.EventTypeNormal, "RDMAPortSteady", port+" port 1 stopped flapping")
}

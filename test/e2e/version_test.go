package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// The version matrix: the TestVersion tests hold on every Kubernetes version the driver
// supports, each for the device model and the features that version's API server takes.
// `make e2e-version KUBE_VERSION=v1.34.4` runs them (with the extended-resource and health
// tests) on a local cluster of that version; on the default cluster they run with the rest
// of the suite. E2E_EXPECT_MODEL (partitionable or legacy), set by the make target from the
// version, makes a model the cluster must have, so that a matrix run cannot pass by
// testing the other model.

var (
	featuresOnce sync.Once
	features     framework.Features
	featuresErr  error
)

// serverFeatures asks the API server once per run what it keeps of the driver's fields.
func serverFeatures(t *testing.T) framework.Features {
	t.Helper()
	featuresOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		features, featuresErr = env.ServerFeatures(ctx)
	})
	if featuresErr != nil {
		t.Fatalf("API server features: %v", featuresErr)
	}
	return features
}

// requireFeature skips a test whose feature the API server does not keep, where that is
// the version's default, and fails it where the feature should be on by default.
func requireFeature(t *testing.T, on bool, gate, what string) {
	t.Helper()
	f := serverFeatures(t)
	switch {
	case on:
	case f.DefaultOn():
		t.Fatalf("the API server (Kubernetes %s) drops %s, although %s is on by default from 1.36: is the gate turned off?", f.Version, what, gate)
	default:
		t.Skipf("Kubernetes %s: %s is off by default before 1.36 and the API server drops %s; the driver does without it there (docs/install.md)", f.Version, gate, what)
	}
}

func TestVersionDeviceModel(t *testing.T) {
	env.NeedMockNode(t)
	f := serverFeatures(t)
	t.Logf("API server %s: DRAPartitionableDevices %t, DRAConsumableCapacity %t, DRADeviceTaints %t, DRAExtendedResource %t: the plugin should publish the %s model",
		f.Version, f.PartitionableDevices, f.ConsumableCapacity, f.DeviceTaints, f.ExtendedResource, f.Model())
	if want := os.Getenv("E2E_EXPECT_MODEL"); want != "" && f.Model() != want {
		t.Fatalf("E2E_EXPECT_MODEL=%s, but the API server (Kubernetes %s) takes the %s model", want, f.Version, f.Model())
	}
	if f.DefaultOn() && !f.Partitionable() {
		t.Errorf("Kubernetes %s drops the partitionable model's fields, although they are on by default from 1.36", f.Version)
	}
	ctx := framework.Context(t, time.Minute)
	list, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + framework.DriverName + ",spec.nodeName=" + env.Node,
	})
	if err != nil {
		t.Fatal(err)
	}
	devices := map[string]resourceapi.Device{}
	counterSets := 0
	for _, s := range list.Items {
		counterSets += len(s.Spec.SharedCounters)
		for _, d := range s.Spec.Devices {
			devices[d.Name] = d
		}
	}
	mode := func(name string) string {
		d, ok := devices[name]
		if !ok {
			return "(not published)"
		}
		if a, ok := devicemodel.LookupAttribute(framework.DriverName, &d, devicemodel.AttrMode); ok && a.StringValue != nil {
			return *a.StringValue
		}
		return "(no mode)"
	}
	const port = "mlx5-0-p1"
	if f.Partitionable() {
		// The plugin keeps its default model: the port whole and in shares, one counter.
		if got := mode(port); got != "exclusive" {
			t.Errorf("%s: mode %s, want exclusive", port, got)
		}
		shared := devices[port+"-shared"]
		if got := mode(port + "-shared"); got != "shared" {
			t.Errorf("%s-shared: mode %s, want shared", port, got)
		}
		if !ptr.Deref(shared.AllowMultipleAllocations, false) {
			t.Errorf("%s-shared: allowMultipleAllocations not set", port)
		}
		if c := shared.Capacity[devicemodel.SharesCapacity]; c.Value.Value() != shares {
			t.Errorf("%s-shared: %s capacity %s, want %d", port, devicemodel.SharesCapacity, c.Value.String(), shares)
		}
		if counterSets == 0 {
			t.Error("no shared counters published")
		}
		return
	}
	// The API server dropped the partitionable fields: the plugin switched to the legacy
	// model by itself (its deviceModel is auto in the chart), single-share devices.
	for k := 0; k < shares; k++ {
		name := devicemodel.LegacyShareName(port, k)
		if got := mode(name); got != "shared" {
			t.Errorf("%s: mode %s, want shared (a legacy single-share device)", name, got)
		}
		if d := devices[name]; d.AllowMultipleAllocations != nil || len(d.ConsumesCounters) > 0 {
			t.Errorf("%s: a legacy device with allowMultipleAllocations %v, consumesCounters %v", name, d.AllowMultipleAllocations, d.ConsumesCounters)
		}
	}
	for _, name := range []string{port, port + "-shared", devicemodel.LegacyShareName(port, shares)} {
		if _, ok := devices[name]; ok {
			t.Errorf("%s published in the legacy model (shared mode, %d shares)", name, shares)
		}
	}
	if counterSets != 0 {
		t.Errorf("%d shared counter sets published in the legacy model", counterSets)
	}
}

// TestVersionShares gives the port's shares to as many pods and keeps one more Pending: in
// the partitionable model as shares of one device, in the legacy model as its single-share
// devices, each to one pod.
func TestVersionShares(t *testing.T) {
	env.NeedMockNode(t)
	f := serverFeatures(t)
	const port, device = "mlx5_3", "mlx5-3-p1"
	ns := env.NewNamespace(t, "version-shares")
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(port), Shares: 1}}, ""))
	var got []string
	for i := 0; i < shares; i++ {
		name := fmt.Sprintf("sharer-%d", i)
		env.CreatePod(t, framework.ReportPod(ns, name, "share"))
	}
	for i := 0; i < shares; i++ {
		name := fmt.Sprintf("sharer-%d", i)
		assertSees(t, name, env.WaitReport(t, ns, name), want{ibdevs: []string{port}})
		got = append(got, framework.AllocatedDevices(env.PodClaim(t, ns, name))...)
	}
	var wantDevs []string
	for k := 0; k < shares; k++ {
		if f.Partitionable() {
			wantDevs = append(wantDevs, "hca="+device+"-shared")
		} else {
			wantDevs = append(wantDevs, "hca="+devicemodel.LegacyShareName(device, k))
		}
	}
	slices.Sort(got)
	if !slices.Equal(got, wantDevs) {
		t.Errorf("%s: the sharers' claims allocated %v, want %v (%s model)", framework.DriverFault, got, wantDevs, f.Model())
	}
	t.Log("a share beyond the port's shares stays Pending")
	env.CreatePod(t, framework.ReportPod(ns, "one-too-many", "share"))
	env.StaysPending(t, ns, "one-too-many", pendingFor)
}

// TestVersionExclusive takes a port whole. In the legacy model a node publishes its ports
// either whole or as shares: the test switches the node to whole ports (legacy.mode
// exclusive) for its duration, and checks that shares are then not to be had.
func TestVersionExclusive(t *testing.T) {
	env.NeedMockNode(t)
	f := serverFeatures(t)
	const port, device = "mlx5_2", "mlx5-2-p1"
	if !f.Partitionable() {
		ctx := framework.Context(t, 10*time.Minute)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			if err := env.Install(ctx, shares); err != nil {
				t.Errorf("reinstall with the suite's values: %v", err)
			}
		})
		if err := installLegacyExclusive(ctx); err != nil {
			t.Fatal(err)
		}
	}
	ns := env.NewNamespace(t, "version-exclusive")
	env.CreateClaimTemplate(t, ns, "whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort(port)}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "whole", "whole"))
	assertSees(t, "whole", env.WaitReport(t, ns, "whole"), want{ibdevs: []string{port}})
	assertAllocated(t, ns, "whole", "hca="+device)

	env.CreatePod(t, framework.ReportPod(ns, "second-whole", "whole"))
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(port), Shares: 1}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "share", "share"))
	env.StaysPending(t, ns, "second-whole", pendingFor)
	env.StaysPending(t, ns, "share", 0)
}

// installLegacyExclusive upgrades the release with legacy.mode exclusive and waits until
// the node publishes its ports whole.
func installLegacyExclusive(ctx context.Context) error {
	if err := env.Upgrade(ctx, "nodeConfig.legacy.mode=exclusive"); err != nil {
		return err
	}
	if err := env.WaitRollout(ctx); err != nil {
		return err
	}
	return framework.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		if _, err := env.SliceDevice(ctx, "mlx5-2-p1"); err != nil {
			return err
		}
		if _, err := env.SliceDevice(ctx, devicemodel.LegacyShareName("mlx5-2-p1", 0)); err == nil {
			return fmt.Errorf("mlx5-2-p1-s0 still published with legacy.mode exclusive")
		}
		return nil
	})
}

// TestVersionHealth takes a port down and back: the plugin's Node events on every version,
// the devices' taints where the API server keeps them (DRADeviceTaints).
func TestVersionHealth(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "write a port's state file in the mock sysfs")
	f := serverFeatures(t)
	const port = "mlx5_6"
	devices := []string{"mlx5-6-p1", "mlx5-6-p1-shared"}
	if !f.Partitionable() {
		devices = nil
		for k := 0; k < shares; k++ {
			devices = append(devices, devicemodel.LegacyShareName("mlx5-6-p1", k))
		}
	}
	ctx := framework.Context(t, 3*time.Minute)
	if err := env.WaitHealthWatching(ctx); err != nil {
		t.Fatal(err)
	}
	env.RestorePortOnCleanup(t, port, 1, devices...)
	if err := env.SetPortState(port, 1, framework.PortDown); err != nil {
		t.Fatal(err)
	}
	waitNodeEvent(t, ctx, corev1.EventTypeWarning, "RDMAPortStateChanged", port+" port 1: ACTIVE", "-> DOWN")
	t.Run("taints", func(t *testing.T) {
		requireFeature(t, f.DeviceTaints, "DRADeviceTaints", "devices' taints")
		if _, err := env.WaitTaint(ctx, time.Minute, "DOWN", devices...); err != nil {
			t.Fatalf("taint after the port went down: %v", err)
		}
	})
	if err := env.SetPortState(port, 1, framework.PortActive); err != nil {
		t.Fatal(err)
	}
	waitNodeEvent(t, ctx, corev1.EventTypeNormal, "RDMAPortStateChanged", port+" port 1: DOWN", "-> ACTIVE")
	if f.DeviceTaints {
		if _, err := env.WaitTaint(ctx, time.Minute, "", devices...); err != nil {
			t.Fatalf("taint after the port came back: %v", err)
		}
	}
}

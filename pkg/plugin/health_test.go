package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drahealthv1 "k8s.io/kubelet/pkg/apis/dra-health/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/livenode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// TestHealthThroughKubeletPluginHelper watches device health the way the kubelet does:
// over the helper's DRAResourceHealth gRPC service. The first message holds every
// device, a port that goes down is reported after one poll, and a reconnecting kubelet
// gets the complete state again.
func TestHealthThroughKubeletPluginHelper(t *testing.T) {
	n := livenode.New(t, "disabled-port", livenode.Options{Clock: testclock.NewFakeClock(epoch), Poll: time.Second})
	bootPath := filepath.Join(t.TempDir(), "boot_id")
	if err := os.WriteFile(bootPath, []byte("boot-1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewClientset()
	d, err := NewDriver(n.Ctx, DriverOptions{
		DriverName: testDriver, NodeName: testNode, Kube: kube,
		Store:   checkpoint.NewStore(t.TempDir(), bootPath),
		Specs:   cdi.NewWriter(cdi.Options{SpecDir: t.TempDir(), DevRoot: "/dev"}),
		Devices: n.Pub,
		Health:  n.Monitor,
	})
	if err != nil {
		t.Fatal(err)
	}
	conn := startHelper(t, n.Ctx, d, kube, "h", true)
	client := drahealthv1.NewDRAResourceHealthClient(conn)

	watch := func() (drahealthv1.DRAResourceHealth_NodeWatchResourcesClient, context.CancelFunc) {
		t.Helper()
		ctx, cancel := context.WithCancel(n.Ctx)
		stream, err := client.NodeWatchResources(ctx, &drahealthv1.NodeWatchResourcesRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return stream, cancel
	}
	// expect receives one message and checks the health of some devices.
	expect := func(stream drahealthv1.DRAResourceHealth_NodeWatchResourcesClient, devices int, want map[string]string) {
		t.Helper()
		msg, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Devices) != devices {
			t.Errorf("%d devices in the report, want %d", len(msg.Devices), devices)
		}
		got := map[string]string{}
		for _, dev := range msg.Devices {
			if dev.Device.PoolName != testPool || dev.HealthCheckTimeoutSeconds != 30 || dev.LastUpdatedTime == 0 {
				t.Errorf("device %+v", dev)
			}
			got[dev.Device.DeviceName] = dev.Health.String() + ": " + dev.Message
		}
		for name, w := range want {
			if got[name] != w {
				t.Errorf("%s: %q, want %q", name, got[name], w)
			}
		}
	}

	// Four ports, each an exclusive, a shared and four legacy single-share devices.
	const devices = 4 * (2 + 16)
	stream, cancel := watch()
	expect(stream, devices, map[string]string{
		"mlx5-0-p1":        "HEALTHY: mlx5_0 port 1 is ACTIVE (LinkUp)",
		"mlx5-2-p1-shared": "UNHEALTHY: mlx5_2 port 1 is DOWN (Disabled)",
		"mlx5-2-p1-s15":    "UNHEALTHY: mlx5_2 port 1 is DOWN (Disabled)",
	})
	n.SetState("mlx5_0", 1, "1: DOWN", "3: Disabled")
	n.Step(time.Second)
	expect(stream, devices, map[string]string{
		"mlx5-0-p1":        "UNHEALTHY: mlx5_0 port 1 is DOWN (Disabled)",
		"mlx5-0-p1-shared": "UNHEALTHY: mlx5_0 port 1 is DOWN (Disabled)",
	})
	cancel()

	// The kubelet reconnects: the complete state at once.
	stream, cancel = watch()
	defer cancel()
	expect(stream, devices, map[string]string{
		"mlx5-0-p1": "UNHEALTHY: mlx5_0 port 1 is DOWN (Disabled)",
		"mlx5-1-p1": "HEALTHY: mlx5_1 port 1 is ACTIVE (LinkUp)",
	})
}

// TestStaleHealthIsNoPublishError: the helper reports a stale health stream through
// HandleError like a publishing problem; only the latter counts as a publish error.
func TestStaleHealthIsNoPublishError(t *testing.T) {
	h := newHarness(t, "disabled-port")
	m := metrics.NewPlugin()
	d, err := NewDriver(h.ctx, DriverOptions{
		DriverName: testDriver, NodeName: testNode, Kube: h.kube,
		Store:   checkpoint.NewStore(h.dataDir, h.bootPath),
		Specs:   cdi.NewWriter(cdi.Options{SpecDir: h.cdiDir, DevRoot: "/dev"}),
		Devices: h.pub, Metrics: m,
	})
	if err != nil {
		t.Fatal(err)
	}
	apiErrors := func() float64 {
		t.Helper()
		families, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if f.GetName() != "rdma_dra_publish_errors_total" {
				continue
			}
			for _, metric := range f.GetMetric() {
				if metric.GetLabel()[0].GetValue() == "apiserver" {
					return metric.GetCounter().GetValue()
				}
			}
		}
		return 0
	}
	// Shaped as the helper makes it (kubeletplugin/health.go): ErrRecoverable wrapped
	// directly, with a message that does not matter.
	d.HandleError(h.ctx, fmt.Errorf("no device health report was sent for 31s: %w", kubeletplugin.ErrRecoverable),
		"device health reports are stale, WatchHealthStatus must re-send within each device's HealthCheckTimeout")
	if got := apiErrors(); got != 0 {
		t.Errorf("stale health counted as %v publish errors", got)
	}
	d.HandleError(h.ctx, wrapRecoverable(errors.New("update resource slice: conflict")), "processing ResourceSlice objects")
	if got := apiErrors(); got != 1 {
		t.Errorf("publishing error counted %v times, want 1", got)
	}
}

// epoch is when the fake clocks of the health and port statistics tests start.
var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

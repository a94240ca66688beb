//go:build kernelvm

package invm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// sink records what the publisher hands to the ResourceSlice controller.
type sink struct {
	mu   sync.Mutex
	last resourceslice.DriverResources
}

func (s *sink) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = r
	return nil
}

// devices returns the published devices of a port: its exclusive and its shared one.
func (s *sink) devices(ibdev string, port int) []resourceapi.Device {
	s.mu.Lock()
	defer s.mu.Unlock()
	whole := devicemodel.DeviceName(ibdev, port)
	names := map[string]bool{whole: true, devicemodel.SharedDeviceName(whole): true}
	var out []resourceapi.Device
	for _, pool := range s.last.Pools {
		for _, sl := range pool.Slices {
			for _, d := range sl.Devices {
				if names[d.Name] {
					out = append(out, d)
				}
			}
		}
	}
	return out
}

// taints returns the taints of every published device of a port, by device name.
func (s *sink) taints(ibdev string, port int) map[string][]resourceapi.DeviceTaint {
	out := map[string][]resourceapi.DeviceTaint{}
	for _, d := range s.devices(ibdev, port) {
		out[d.Name] = d.Taints
	}
	return out
}

// TestHealthFollowsPortState takes a soft-RoCE port's netdev down and up, and follows the
// change through the kubelet plugin's own pieces on the real kernel: the health monitor
// notices it (by its poll alone, and with rtnetlink), the publisher rescans and taints
// the port's devices (or lifts the taint), and the kubelet's health stream reports them
// unhealthy (or healthy).
func TestHealthFollowsPortState(t *testing.T) {
	for _, tc := range []struct {
		name  string
		links health.LinkSource
	}{
		{"poll", nil},
		{"poll and rtnetlink", health.NetlinkSource{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			r := newRoCE(t, "rxe2", "veth2", "veth2p")
			mon, err := health.New(health.Options{SysfsRoot: "/sys", PollInterval: 200 * time.Millisecond, Links: tc.links})
			if err != nil {
				t.Fatal(err)
			}
			out := &sink{}
			pub := publish.New(discovery.New(discovery.Options{UseNetlink: true}),
				devicemodel.Options{NodeName: "vm"}, publish.ModelPartitionable, publish.Options{Observer: mon})
			pub.SetSink(out)
			if err := pub.Sync(ctx); err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			defer wg.Wait()
			defer cancel()
			reports := make(chan kubeletplugin.DeviceHealthReport, 64)
			wg.Add(3)
			go func() { defer wg.Done(); mon.Run(ctx) }()
			go func() { defer wg.Done(); pub.Run(ctx, mon) }()
			go func() { defer wg.Done(); _ = mon.Watch(ctx, reports) }()
			var mu sync.Mutex
			latest := map[string]kubeletplugin.HealthStatus{}
			go func() {
				for {
					select {
					case <-ctx.Done():
						return
					case rep := <-reports:
						mu.Lock()
						for _, d := range rep.Devices {
							latest[d.DeviceName] = d.Health
						}
						mu.Unlock()
					}
				}
			}()
			expect := func(what string, wantTaint bool, wantHealth kubeletplugin.HealthStatus) {
				t.Helper()
				eventually(t, what, func() (bool, string) {
					taints := out.taints(r.IBDev, 1)
					if len(taints) == 0 {
						return false, "no device of " + r.IBDev + " published"
					}
					mu.Lock()
					defer mu.Unlock()
					for name, ts := range taints {
						tainted := len(ts) == 1 && ts[0].Key == devicemodel.NotActiveTaintKey && ts[0].Value == "DOWN" && ts[0].Effect == resourceapi.DeviceTaintEffectNoSchedule
						if tainted != wantTaint || (!wantTaint && len(ts) != 0) {
							return false, fmt.Sprintf("device %s has taints %+v", name, ts)
						}
						if latest[name] != wantHealth {
							return false, fmt.Sprintf("device %s is %q in the health stream", name, latest[name])
						}
					}
					return true, ""
				})
			}
			expect("the port starts healthy and untainted", false, kubeletplugin.HealthStatusHealthy)
			run(t, "ip", "link", "set", r.Netdev, "down")
			expect("netdev down: tainted DOWN and unhealthy", true, kubeletplugin.HealthStatusUnhealthy)
			run(t, "ip", "link", "set", r.Netdev, "up")
			expect("netdev up: untainted and healthy", false, kubeletplugin.HealthStatusHealthy)
		})
	}
}

package publish_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/livenode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// devicesOf returns the published devices of the pool by name.
func devicesOf(r resourceslice.DriverResources) map[string]resourceapi.Device {
	out := map[string]resourceapi.Device{}
	for _, s := range r.Pools[livenode.PoolName].Slices {
		for _, d := range s.Devices {
			out[d.Name] = d
		}
	}
	return out
}

func notActive(value string, effect resourceapi.DeviceTaintEffect) []resourceapi.DeviceTaint {
	return []resourceapi.DeviceTaint{{Key: devicemodel.NotActiveTaintKey, Value: value, Effect: effect}}
}

// TestRepublishTransitions: every change a poll sees is republished after that one poll,
// once, with the taint of a port that is not ACTIVE, and in the health stream. In a
// synctest bubble: see livenode.Node.WaitPublished.
func TestRepublishTransitions(t *testing.T) {
	for _, effect := range []resourceapi.DeviceTaintEffect{resourceapi.DeviceTaintEffectNoSchedule, resourceapi.DeviceTaintEffectNoExecute} {
		t.Run(string(effect), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := livenode.New(t, "disabled-port", livenode.Options{Clock: testclock.NewFakeClock(epoch), Poll: time.Second, Effect: effect})
				reports := make(chan kubeletplugin.DeviceHealthReport, 100)
				go func() { _ = n.Monitor.Watch(n.Ctx, reports) }()
				healthOf := func(device string) string {
					t.Helper()
					var last kubeletplugin.DeviceHealthReport
					for len(reports) > 0 || last.Devices == nil {
						select {
						case last = <-reports:
						case <-time.After(10 * time.Second):
							t.Fatal("no health report")
						}
					}
					for _, d := range last.Devices {
						if d.DeviceName == device {
							return string(d.Health) + ": " + d.Message
						}
					}
					return "missing"
				}
				// The profile's disabled port is tainted from the start.
				first := devicesOf(n.Sink.Last())
				if diff := cmp.Diff(notActive("DOWN", effect), first["mlx5-2-p1"].Taints); diff != "" {
					t.Errorf("disabled port (-want +got):\n%s", diff)
				}

				var plug func()
				steps := []struct {
					name   string
					change func()
					// device is checked: its taint value ("" for none), its phys_state
					// attribute, and its health.
					device, taint, phys, health string
					present                     bool
				}{
					{"ACTIVE to DOWN", func() { n.SetState("mlx5_0", 1, "1: DOWN", "3: Disabled") },
						"mlx5-0-p1", "DOWN", "Disabled", "Unhealthy: mlx5_0 port 1 is DOWN (Disabled)", true},
					{"DOWN to INIT", func() { n.SetState("mlx5_0", 1, "2: INIT", "5: LinkUp") },
						"mlx5-0-p1", "INIT", "LinkUp", "Unhealthy: mlx5_0 port 1 is INIT (LinkUp)", true},
					{"INIT to ACTIVE", func() { n.SetState("mlx5_0", 1, "4: ACTIVE", "5: LinkUp") },
						"mlx5-0-p1", "", "LinkUp", "Healthy: mlx5_0 port 1 is ACTIVE (LinkUp)", true},
					{"phys_state alone", func() { n.SetState("mlx5_0", 1, "4: ACTIVE", "6: LinkErrorRecovery") },
						"mlx5-0-p1-shared", "", "LinkErrorRecovery", "Healthy: mlx5_0 port 1 is ACTIVE (LinkErrorRecovery)", true},
					{"the disabled port comes up", func() { n.SetState("mlx5_2", 1, "4: ACTIVE", "5: LinkUp") },
						"mlx5-2-p1-shared", "", "LinkUp", "Healthy: mlx5_2 port 1 is ACTIVE (LinkUp)", true},
					{"a device disappears", func() { plug = unplug(t, n.Root, "mlx5_3") },
						"mlx5-3-p1", "", "", "Unhealthy: mlx5_3 port 1 is no longer on the node", false},
					{"and comes back", func() { plug() },
						"mlx5-3-p1", "", "LinkUp", "Healthy: mlx5_3 port 1 is ACTIVE (LinkUp)", true},
				}
				for i, s := range steps {
					s.change()
					n.Step(time.Second)
					devices := devicesOf(n.WaitPublished(i + 2))
					d, ok := devices[s.device]
					if ok != s.present {
						t.Fatalf("%s: %s published %v, want %v", s.name, s.device, ok, s.present)
					}
					if s.present {
						var want []resourceapi.DeviceTaint
						if s.taint != "" {
							want = notActive(s.taint, effect)
						}
						if diff := cmp.Diff(want, d.Taints); diff != "" {
							t.Errorf("%s: taints (-want +got):\n%s", s.name, diff)
						}
						if a, _ := devicemodel.LookupAttribute(devicemodel.DefaultDriverName, &d, devicemodel.AttributeDomain+"/phys_state"); a.StringValue == nil || *a.StringValue != s.phys {
							got := a.StringValue
							t.Errorf("%s: phys_state %v, want %s", s.name, got, s.phys)
						}
					}
					if got := healthOf(s.device); got != s.health {
						t.Errorf("%s: health %q, want %q", s.name, got, s.health)
					}
				}
				want := `
# HELP rdma_dra_republish_total [ALPHA] ResourceSlices republished after a change, by what noticed it (poll, netlink, rescan, fallback).
# TYPE rdma_dra_republish_total counter
rdma_dra_republish_total{trigger="fallback"} 0
rdma_dra_republish_total{trigger="netlink"} 0
rdma_dra_republish_total{trigger="poll"} 7
rdma_dra_republish_total{trigger="rescan"} 0
`
				if err := testutil.GatherAndCompare(n.Metrics.Registry(), strings.NewReader(want), "rdma_dra_republish_total"); err != nil {
					t.Error(err)
				}
				// Every poll's change is timed; the fake clock makes each take no time.
				if vec, err := testutil.GetHistogramVecFromGatherer(n.Metrics.Registry(), "rdma_dra_republish_latency_seconds", nil); err != nil || len(vec) != 1 {
					t.Errorf("latency histogram: %d series, %v", len(vec), err)
				}
			})
		})
	}
}

var epoch = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// unplug removes the device's class link, as unbinding its driver does, and returns a
// function that plugs it back.
func unplug(t *testing.T, root, ibdev string) func() {
	t.Helper()
	link := filepath.Join(root, "class/infiniband", ibdev)
	target, err := os.Readlink(link)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(link); err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRepublishDamping: a port that flaps every second is republished at most the
// configured number of times a minute, and its last state is published once the budget
// allows, even though it did not change again. In a synctest bubble: see livenode.Node.WaitPublished.
func TestRepublishDamping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testclock.NewFakeClock(epoch)
		// Four a minute: a burst of two, then one every thirty seconds.
		n := livenode.New(t, "disabled-port", livenode.Options{Clock: c, Poll: time.Second, MaxPerMinute: 4})
		taint := func() string {
			t.Helper()
			d := devicesOf(n.Sink.Last())["mlx5-0-p1"]
			if len(d.Taints) == 0 {
				return "ACTIVE"
			}
			return d.Taints[0].Value
		}
		// 21 flips, one a second, ending DOWN.
		for i := 1; i <= 21; i++ {
			if i%2 == 1 {
				n.SetState("mlx5_0", 1, "1: DOWN", "3: Disabled")
			} else {
				n.SetState("mlx5_0", 1, "4: ACTIVE", "5: LinkUp")
			}
			n.Step(time.Second)
			if i <= 2 {
				// The burst: each flip is out after its poll.
				n.WaitPublished(1 + i)
			}
		}
		// Held back since the third flip: what is published is the second flip's state.
		if got, want := n.Sink.Count(), 3; got != want {
			t.Fatalf("%d publishes during the flapping, want %d", got, want)
		}
		if got := taint(); got != "ACTIVE" {
			t.Errorf("published during damping: %s", got)
		}
		// The port stays DOWN; once a token has refilled (thirty seconds after the first
		// publish of the burst, at 31s) the last state is out.
		for range 10 {
			n.Step(time.Second)
		}
		n.WaitPublished(4)
		if got := taint(); got != "DOWN" {
			t.Errorf("last state published %s, want DOWN", got)
		}
		if at := c.Now(); at.After(epoch.Add(31 * time.Second)) {
			t.Errorf("trailing publish at %s", at.Sub(epoch))
		}
		// Quiet from here: nothing more to publish, however long.
		for range 60 {
			n.Step(time.Second)
		}
		n.WaitPublished(4)
		if got := metricValue(t, n.Metrics, "rdma_dra_republish_damped_total"); got < 1 {
			t.Errorf("damped republishes %v, want at least 1", got)
		}
	})
}

// metricValue returns the value of an unlabelled counter or gauge.
func metricValue(t *testing.T, m *metrics.Plugin, name string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			metric := f.GetMetric()[0]
			if metric.GetCounter() != nil {
				return metric.GetCounter().GetValue()
			}
			return metric.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

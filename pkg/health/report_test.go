package health

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// models builds both device models of inv, as the publisher does.
func models(t testing.TB, inv *discovery.Inventory) []*devicemodel.Result {
	t.Helper()
	var out []*devicemodel.Result
	for _, legacy := range []bool{false, true} {
		// Four legacy shares per port keep the expected reports short.
		cfg := nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: 4}}
		r, err := devicemodel.Build(inv, devicemodel.Options{NodeName: "node-1", Legacy: legacy, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// summary is a report without timestamps, one "device health message" line per device.
func summary(r kubeletplugin.DeviceHealthReport) []string {
	var out []string
	for _, d := range r.Devices {
		out = append(out, d.PoolName+"/"+d.DeviceName+" "+string(d.Health)+" "+d.Message)
	}
	return out
}

func TestReporterContent(t *testing.T) {
	inv := &discovery.Inventory{Ports: []discovery.Port{
		{IBDev: "mlx5_0", Port: 1, State: "ACTIVE", PhysState: "LinkUp"},
		{IBDev: "mlx5_1", Port: 1, State: "DOWN", PhysState: "Disabled"},
	}}
	c := testclock.NewFakeClock(epoch)
	r := NewReporter(c)
	r.SetDevices(models(t, inv)...)
	r.SetStates(statesOf(inv), c.Now())
	report, fresh, _ := r.Report()
	// Exclusive, shared and the legacy shares: every device a claim may hold.
	want := []string{
		"node-1-rdma/mlx5-0-p1 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-0-p1-s0 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-0-p1-s1 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-0-p1-s2 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-0-p1-s3 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-0-p1-shared Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		"node-1-rdma/mlx5-1-p1 Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
		"node-1-rdma/mlx5-1-p1-s0 Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
		"node-1-rdma/mlx5-1-p1-s1 Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
		"node-1-rdma/mlx5-1-p1-s2 Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
		"node-1-rdma/mlx5-1-p1-s3 Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
		"node-1-rdma/mlx5-1-p1-shared Unhealthy mlx5_1 port 1 is DOWN (Disabled)",
	}
	if diff := cmp.Diff(want, summary(report)); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if !fresh {
		t.Error("just verified, not fresh")
	}
	for _, d := range report.Devices {
		if !d.LastUpdated.Equal(epoch) || d.HealthCheckTimeout != 30*time.Second {
			t.Fatalf("%s: last updated %s, timeout %s", d.DeviceName, d.LastUpdated, d.HealthCheckTimeout)
		}
	}

	// The device disappears: its devices stay in the report, unhealthy.
	gone := &discovery.Inventory{Ports: inv.Ports[:1]}
	r.SetDevices(models(t, gone)...)
	report, _, _ = r.Report()
	if got := summary(report)[6:]; !cmp.Equal(got, []string{
		"node-1-rdma/mlx5-1-p1 Unhealthy mlx5_1 port 1 is no longer on the node",
		"node-1-rdma/mlx5-1-p1-s0 Unhealthy mlx5_1 port 1 is no longer on the node",
		"node-1-rdma/mlx5-1-p1-s1 Unhealthy mlx5_1 port 1 is no longer on the node",
		"node-1-rdma/mlx5-1-p1-s2 Unhealthy mlx5_1 port 1 is no longer on the node",
		"node-1-rdma/mlx5-1-p1-s3 Unhealthy mlx5_1 port 1 is no longer on the node",
		"node-1-rdma/mlx5-1-p1-shared Unhealthy mlx5_1 port 1 is no longer on the node",
	}) {
		t.Errorf("removed devices: %q", got)
	}
	// And come back.
	r.SetDevices(models(t, inv)...)
	report, _, _ = r.Report()
	if diff := cmp.Diff(want, summary(report)); diff != "" {
		t.Errorf("back (-want +got):\n%s", diff)
	}

	// Not verified for longer than the timeout: not fresh.
	c.Step(HealthCheckTimeout + time.Second)
	if _, fresh, _ := r.Report(); fresh {
		t.Error("fresh after the timeout")
	}
}

// TestReporterWatch: the complete report at once, on a change, every ten seconds; stale
// states are not re-sent; a canceled stream never blocks; two streams at once. It runs
// in a synctest bubble, so that "not re-sent" is checked once the stream waits.
func TestReporterWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, ctx := ktesting.NewTestContext(t)
		inv := &discovery.Inventory{Ports: []discovery.Port{{IBDev: "mlx5_0", Port: 1, State: "ACTIVE", PhysState: "LinkUp"}}}
		c := testclock.NewFakeClock(epoch)
		r := NewReporter(c)
		r.SetDevices(models(t, inv)[0])
		r.SetStates(statesOf(inv), c.Now())

		type stream struct {
			reports chan kubeletplugin.DeviceHealthReport
			cancel  context.CancelFunc
			done    chan error
		}
		start := func() stream {
			sctx, cancel := context.WithCancel(ctx)
			s := stream{reports: make(chan kubeletplugin.DeviceHealthReport), cancel: cancel, done: make(chan error, 1)}
			go func() { s.done <- r.Watch(sctx, s.reports) }()
			return s
		}
		receive := func(s stream, want ...string) kubeletplugin.DeviceHealthReport {
			t.Helper()
			select {
			case got := <-s.reports:
				if diff := cmp.Diff(want, summary(got)); diff != "" {
					t.Errorf("report (-want +got):\n%s", diff)
				}
				return got
			case <-time.After(10 * time.Second):
				t.Fatal("no report")
			}
			return kubeletplugin.DeviceHealthReport{}
		}
		healthy := []string{
			"node-1-rdma/mlx5-0-p1 Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
			"node-1-rdma/mlx5-0-p1-shared Healthy mlx5_0 port 1 is ACTIVE (LinkUp)",
		}
		down := []string{
			"node-1-rdma/mlx5-0-p1 Unhealthy mlx5_0 port 1 is DOWN (Disabled)",
			"node-1-rdma/mlx5-0-p1-shared Unhealthy mlx5_0 port 1 is DOWN (Disabled)",
		}

		s1 := start()
		receive(s1, healthy...)
		// A change is sent at once.
		r.SetStates(map[PortID]PortState{{"mlx5_0", 1}: {"DOWN", "Disabled"}}, c.Now())
		receive(s1, down...)
		// A second stream (the kubelet reconnected) starts with the complete report.
		s2 := start()
		receive(s2, down...)
		// Polls that change nothing send nothing; the periodic resend does, with the time
		// of the last poll.
		c.Step(5 * time.Second)
		r.SetStates(map[PortID]PortState{{"mlx5_0", 1}: {"DOWN", "Disabled"}}, c.Now())
		waitFor(t, func() bool { return c.Waiters() == 2 })
		c.Step(5 * time.Second)
		for _, s := range []stream{s1, s2} {
			got := receive(s, down...)
			if !got.Devices[0].LastUpdated.Equal(epoch.Add(5 * time.Second)) {
				t.Errorf("resend last updated %s", got.Devices[0].LastUpdated)
			}
		}
		// The first stream's kubelet goes away without reading: Watch returns, unblocked.
		r.SetStates(map[PortID]PortState{{"mlx5_0", 1}: {"ACTIVE", "LinkUp"}}, c.Now())
		s1.cancel()
		if err := <-s1.done; err != nil {
			t.Errorf("canceled stream: %v", err)
		}
		receive(s2, healthy...)
		// Polling stops: the resends stop once the states are older than the timeout, so
		// that the kubelet decays them to unknown.
		for range 2 {
			waitForTimer(t, c)
			c.Step(ResendInterval)
			receive(s2, healthy...)
		}
		waitForTimer(t, c)
		c.Step(ResendInterval + time.Second) // 31s since the last poll
		waitForTimer(t, c)
		// Once the stream waits, nothing is on its way.
		synctest.Wait()
		select {
		case got := <-s2.reports:
			t.Errorf("stale report sent: %q", summary(got))
		default:
		}
		// Polling resumes: reports resume.
		r.SetStates(map[PortID]PortState{{"mlx5_0", 1}: {"ACTIVE", "LinkUp"}}, c.Now())
		c.Step(ResendInterval)
		receive(s2, healthy...)
		s2.cancel()
		if err := <-s2.done; err != nil {
			t.Errorf("canceled stream: %v", err)
		}
	})
}

// TestReporterBoundsRemovedDevices: devices that left the node are reported for
// GoneRetention and at most MaxGone of them are kept, however many names come and go.
func TestReporterBoundsRemovedDevices(t *testing.T) {
	c := testclock.NewFakeClock(epoch)
	r := NewReporter(c)
	// Every round the node's one adapter comes back under another name: 2 exclusive and
	// shared + 4 legacy devices per round go.
	const rounds = MaxGone/6 + 100
	for i := range rounds {
		inv := &discovery.Inventory{Ports: []discovery.Port{{IBDev: fmt.Sprintf("mlx5_%d", i), Port: 1, State: "ACTIVE", PhysState: "LinkUp"}}}
		r.SetDevices(models(t, inv)...)
		c.Step(time.Second)
	}
	report, _, _ := r.Report()
	if n := len(report.Devices); n > MaxGone+6 {
		t.Errorf("report holds %d devices after %d renames, want at most %d removed ones and the 6 present", n, rounds, MaxGone)
	}
	// The newest removed devices are the ones kept.
	last := fmt.Sprintf("mlx5-%d-p1", rounds-2)
	if !slices.ContainsFunc(report.Devices, func(d kubeletplugin.DeviceHealth) bool { return d.DeviceName == last }) {
		t.Errorf("the most recently removed device %s is not reported", last)
	}
	c.Step(GoneRetention + time.Second)
	report, _, _ = r.Report()
	if n := len(report.Devices); n != 6 {
		t.Errorf("after %s, %d devices reported, want only the 6 present", GoneRetention, n)
	}
}

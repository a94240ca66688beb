package metrics

import (
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

func TestHealthMetrics(t *testing.T) {
	m := NewPlugin()
	m.SetPortState("mlx5_0", 1, "ACTIVE")
	m.SetPortState("mlx5_1", 1, "ACTIVE")
	m.SetPortState("mlx5_1", 1, "DOWN")
	m.SetPortState("mlx5_2", 1, "")
	m.SetPortState("mlx5_3", 1, "ACTIVE")
	m.DeletePort("mlx5_3", 1)
	m.Republished("poll")
	m.Republished("poll")
	m.Republished("netlink")
	m.ObserveRepublishLatency(3 * time.Millisecond)
	m.ObserveRepublishLatency(1200 * time.Millisecond)
	m.RepublishDamped()

	var want strings.Builder
	want.WriteString(`
# HELP rdma_dra_port_state [ALPHA] 1 for the logical state each RDMA port is in, 0 for the others; device is the RDMA device (ibdev).
# TYPE rdma_dra_port_state gauge
`)
	// One series per known state and port, 1 for the current one; mlx5_3 is gone.
	for _, p := range []struct{ device, state string }{{"mlx5_0", "ACTIVE"}, {"mlx5_1", "DOWN"}, {"mlx5_2", "Unknown"}} {
		for _, s := range []string{"ACTIVE", "ACTIVE_DEFER", "ARMED", "DOWN", "INIT", "NOP", "Unknown"} {
			v := "0"
			if s == p.state {
				v = "1"
			}
			want.WriteString(`rdma_dra_port_state{device="` + p.device + `",port="1",state="` + s + `"} ` + v + "\n")
		}
	}
	want.WriteString(`# HELP rdma_dra_republish_total [ALPHA] ResourceSlices republished after a change, by what noticed it (poll, netlink, rescan, fallback).
# TYPE rdma_dra_republish_total counter
rdma_dra_republish_total{trigger="fallback"} 0
rdma_dra_republish_total{trigger="netlink"} 1
rdma_dra_republish_total{trigger="poll"} 2
rdma_dra_republish_total{trigger="rescan"} 0
# HELP rdma_dra_republish_damped_total [ALPHA] Republishes held back by --max-republish-per-minute; each was published later with the state of that time.
# TYPE rdma_dra_republish_damped_total counter
rdma_dra_republish_damped_total 1
`)
	names := []string{"rdma_dra_port_state", "rdma_dra_republish_total", "rdma_dra_republish_damped_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want.String()), names...); err != nil {
		t.Error(err)
	}
	latency, err := testutil.GetHistogramVecFromGatherer(m.Registry(), "rdma_dra_republish_latency_seconds", nil)
	if err != nil || len(latency) != 1 || latency.GetAggregatedSampleCount() != 2 {
		t.Errorf("republish latency: %d series, %v, want one with 2 observations", len(latency), err)
	}
}

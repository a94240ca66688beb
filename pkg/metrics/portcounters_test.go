package metrics

import (
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"

	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// fakeSource serves a fixed reading and claims.
type fakeSource struct {
	reading portcounters.Reading
	stale   bool
	claims  []PortClaim
}

func (f *fakeSource) PortCounters() (portcounters.Reading, bool) { return f.reading, f.stale }
func (f *fakeSource) PortClaims() []PortClaim                    { return f.claims }

// twoPorts is a reading of an InfiniBand port and a RoCE port.
func twoPorts() portcounters.Reading {
	ib := portcounters.PortReading{Port: portcounters.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: "InfiniBand"}}
	ib.Values[portcounters.XmitData], ib.Has[portcounters.XmitData] = 1000, true
	ib.Values[portcounters.LinkDowned], ib.Has[portcounters.LinkDowned] = 2, true
	ib.HW = []portcounters.HWCounter{{Name: "out_of_buffer", Value: 5}}
	roce := portcounters.PortReading{Port: portcounters.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: "Ethernet"}}
	roce.Values[portcounters.RcvData], roce.Has[portcounters.RcvData] = 7, true
	roce.HW = []portcounters.HWCounter{{Name: "np_cnp_sent", Value: 30}, {Name: "rp_cnp_handled", Value: 40}}
	return portcounters.Reading{Ports: []portcounters.PortReading{ib, roce}}
}

func TestPortCounterMetrics(t *testing.T) {
	tests := []struct {
		name   string
		source *fakeSource
		names  []string
		want   string
	}{
		{
			name: "exclusive holder on the series, shares in claim_info",
			source: &fakeSource{reading: twoPorts(), claims: []PortClaim{
				{IBDev: "mlx5_8", Port: 1, Namespace: "b", Name: "share-2"},
				{IBDev: "mlx5_0", Port: 1, Namespace: "team", Name: "trainer", Exclusive: true},
				{IBDev: "mlx5_8", Port: 1, Namespace: "a", Name: "share-1"},
				{IBDev: "mlx5_8", Port: 1, Namespace: "a", Name: "share-1"}, // two devices of one port: one series
			}},
			names: []string{"rdma_dra_port_transmit_bytes_total", "rdma_dra_port_receive_bytes_total", "rdma_dra_port_link_downed_total",
				"rdma_dra_port_hw_stat_total", "rdma_dra_port_claim_info", "rdma_dra_port_stats_stale_scrapes_total"},
			want: `
# HELP rdma_dra_port_transmit_bytes_total [ALPHA] Bytes transmitted by the RDMA port on all virtual lanes: counters/port_xmit_data, which counts 4-byte words, times 4.
# TYPE rdma_dra_port_transmit_bytes_total counter
rdma_dra_port_transmit_bytes_total{claim="trainer",claim_namespace="team",ibdev="mlx5_0",link_layer="InfiniBand",node="node-1",port="1"} 4000
# HELP rdma_dra_port_receive_bytes_total [ALPHA] Bytes received by the RDMA port on all virtual lanes: counters/port_rcv_data, which counts 4-byte words, times 4.
# TYPE rdma_dra_port_receive_bytes_total counter
rdma_dra_port_receive_bytes_total{claim="",claim_namespace="",ibdev="mlx5_8",link_layer="Ethernet",node="node-1",port="1"} 28
# HELP rdma_dra_port_link_downed_total [ALPHA] Times the RDMA port's link went down after error recovery failed (counters/link_downed, 8 bits, stops at 255; soft-RoCE: hw_counters/link_downed).
# TYPE rdma_dra_port_link_downed_total counter
rdma_dra_port_link_downed_total{claim="trainer",claim_namespace="team",ibdev="mlx5_0",link_layer="InfiniBand",node="node-1",port="1"} 2
# HELP rdma_dra_port_hw_stat_total [ALPHA] The RDMA port's driver counters (ports/<p>/hw_counters/<counter>, every file but lifespan), named as the driver names them: mlx5's queue and congestion counters (out_of_buffer, np_cnp_sent, rp_cnp_handled, ...), soft-RoCE's.
# TYPE rdma_dra_port_hw_stat_total counter
rdma_dra_port_hw_stat_total{claim="",claim_namespace="",counter="np_cnp_sent",ibdev="mlx5_8",link_layer="Ethernet",node="node-1",port="1"} 30
rdma_dra_port_hw_stat_total{claim="",claim_namespace="",counter="rp_cnp_handled",ibdev="mlx5_8",link_layer="Ethernet",node="node-1",port="1"} 40
rdma_dra_port_hw_stat_total{claim="trainer",claim_namespace="team",counter="out_of_buffer",ibdev="mlx5_0",link_layer="InfiniBand",node="node-1",port="1"} 5
# HELP rdma_dra_port_claim_info [ALPHA] Always 1: a ResourceClaim prepared on this node holds the RDMA port, exclusive (the whole port) or shared (some of its shares).
# TYPE rdma_dra_port_claim_info gauge
rdma_dra_port_claim_info{claim="share-1",claim_namespace="a",ibdev="mlx5_8",mode="shared",node="node-1",port="1"} 1
rdma_dra_port_claim_info{claim="share-2",claim_namespace="b",ibdev="mlx5_8",mode="shared",node="node-1",port="1"} 1
rdma_dra_port_claim_info{claim="trainer",claim_namespace="team",ibdev="mlx5_0",mode="exclusive",node="node-1",port="1"} 1
# HELP rdma_dra_port_stats_stale_scrapes_total [ALPHA] Scrapes that got port counters older than they should be, because reading sysfs took longer than the scrape may wait.
# TYPE rdma_dra_port_stats_stale_scrapes_total counter
rdma_dra_port_stats_stale_scrapes_total 0
`,
		},
		{
			name: "two exclusive holders: the first by name, every one in claim_info",
			source: &fakeSource{reading: portcounters.Reading{Ports: twoPorts().Ports[:1]}, stale: true, claims: []PortClaim{
				{IBDev: "mlx5_0", Port: 1, Namespace: "team", Name: "new", Exclusive: true},
				{IBDev: "mlx5_0", Port: 1, Namespace: "team", Name: "old", Exclusive: true},
			}},
			names: []string{"rdma_dra_port_link_downed_total", "rdma_dra_port_claim_info"},
			want: `
# HELP rdma_dra_port_link_downed_total [ALPHA] Times the RDMA port's link went down after error recovery failed (counters/link_downed, 8 bits, stops at 255; soft-RoCE: hw_counters/link_downed).
# TYPE rdma_dra_port_link_downed_total counter
rdma_dra_port_link_downed_total{claim="new",claim_namespace="team",ibdev="mlx5_0",link_layer="InfiniBand",node="node-1",port="1"} 2
# HELP rdma_dra_port_claim_info [ALPHA] Always 1: a ResourceClaim prepared on this node holds the RDMA port, exclusive (the whole port) or shared (some of its shares).
# TYPE rdma_dra_port_claim_info gauge
rdma_dra_port_claim_info{claim="new",claim_namespace="team",ibdev="mlx5_0",mode="exclusive",node="node-1",port="1"} 1
rdma_dra_port_claim_info{claim="old",claim_namespace="team",ibdev="mlx5_0",mode="exclusive",node="node-1",port="1"} 1
`,
		},
		{
			name:  "no source: no series",
			names: []string{"rdma_dra_port_transmit_bytes_total", "rdma_dra_port_claim_info"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewPlugin()
			if tt.source != nil {
				m.ServePortCounters("node-1", tt.source)
			}
			if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(tt.want), tt.names...); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestStaleScrapes: every scrape served an old reading counts.
func TestStaleScrapes(t *testing.T) {
	m := NewPlugin()
	source := &fakeSource{reading: twoPorts(), stale: true}
	m.ServePortCounters("node-1", source)
	for _, stale := range []bool{true, false, true} {
		source.stale = stale
		if _, err := m.Registry().Gather(); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := testutil.GetCounterMetricValue(m.staleScrapes); err != nil || v != 2 {
		t.Errorf("stale scrapes %v, %v, want 2", v, err)
	}
}

func TestObservePortCounterRead(t *testing.T) {
	m := NewPlugin()
	m.ObservePortCounterRead(portcounters.Reading{Errors: 3, Duration: 4 * time.Millisecond})
	m.ObservePortCounterRead(portcounters.Reading{Duration: 2 * time.Millisecond})
	want := `
# HELP rdma_dra_port_stats_read_errors_total [ALPHA] Port counter files that exist but could not be read or parsed; their series are left out of that scrape.
# TYPE rdma_dra_port_stats_read_errors_total counter
rdma_dra_port_stats_read_errors_total 3
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "rdma_dra_port_stats_read_errors_total"); err != nil {
		t.Error(err)
	}
	h, err := testutil.GetHistogramVecFromGatherer(m.Registry(), "rdma_dra_port_stats_read_duration_seconds", nil)
	if err != nil || h.GetAggregatedSampleCount() != 2 {
		t.Errorf("read duration: %v, %d observations, want 2", err, h.GetAggregatedSampleCount())
	}
}

func TestPortFlappingGauge(t *testing.T) {
	m := NewPlugin()
	m.SetPortFlapping("mlx5_0", 1, true)
	m.SetPortFlapping("mlx5_1", 1, true)
	m.SetPortFlapping("mlx5_1", 1, false)
	m.SetPortFlapping("mlx5_2", 1, true)
	m.SetPortState("mlx5_2", 1, "ACTIVE")
	m.DeletePort("mlx5_2", 1)
	want := `
# HELP rdma_dra_port_flapping [ALPHA] 1 while the RDMA port's devices carry the rdma.dra.io/port-flapping taint (link_downed or symbol_error rose over the node's thresholds), 0 otherwise; device is the RDMA device (ibdev).
# TYPE rdma_dra_port_flapping gauge
rdma_dra_port_flapping{device="mlx5_0",port="1"} 1
rdma_dra_port_flapping{device="mlx5_1",port="1"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "rdma_dra_port_flapping"); err != nil {
		t.Error(err)
	}
}

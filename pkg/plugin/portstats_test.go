package plugin

import (
	"cmp"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	gocmp "github.com/google/go-cmp/cmp"
	"k8s.io/component-base/metrics/testutil"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

func TestPortClaims(t *testing.T) {
	cp := checkpoint.New("boot")
	cp.Claims = map[string]*checkpoint.Claim{
		"u1": {UID: "u1", Namespace: "team", Name: "trainer", Phase: checkpoint.PhasePrepareCompleted, Devices: []checkpoint.Device{
			{Device: "mlx5-0-p1", IBDev: "mlx5_0", Port: 1, Exclusive: true},
		}},
		"u2": {UID: "u2", Namespace: "team", Name: "infer", Phase: checkpoint.PhasePrepareStarted, Devices: []checkpoint.Device{
			{Device: "mlx5-1-p1-shared", IBDev: "mlx5_1", Port: 1, Shares: 2},
		}},
		"u3": {UID: "u3", Namespace: "legacy", Name: "unit", Devices: []checkpoint.Device{
			{Device: "legacy-rail", IBDev: "mlx5_0", Port: 1, Ports: []checkpoint.PortRef{{IBDev: "mlx5_0", Port: 1}, {IBDev: "mlx5_2", Port: 1}}},
		}},
		"u4": {UID: "u4", Namespace: "ops", Name: "monitor", Devices: []checkpoint.Device{
			{Device: "mlx5-1-p1", IBDev: "mlx5_1", Port: 1, Exclusive: true, AdminAccess: true},
		}},
	}
	got := portClaims(cp)
	slices.SortFunc(got, func(a, b metrics.PortClaim) int {
		return cmp.Or(cmp.Compare(a.IBDev, b.IBDev), cmp.Compare(a.Name, b.Name))
	})
	want := []metrics.PortClaim{
		{IBDev: "mlx5_0", Port: 1, Namespace: "team", Name: "trainer", Exclusive: true},
		{IBDev: "mlx5_0", Port: 1, Namespace: "legacy", Name: "unit"},
		{IBDev: "mlx5_1", Port: 1, Namespace: "team", Name: "infer"},
		{IBDev: "mlx5_2", Port: 1, Namespace: "legacy", Name: "unit"},
	}
	slices.SortFunc(want, func(a, b metrics.PortClaim) int {
		return cmp.Or(cmp.Compare(a.IBDev, b.IBDev), cmp.Compare(a.Name, b.Name))
	})
	if diff := gocmp.Diff(want, got); diff != "" {
		t.Errorf("port claims (-want +got):\n%s", diff)
	}
}

// TestPortStatsServesTheCheckpointsClaims: what /metrics says of a port follows the
// checkpoint's commits, and the counters come from the reader.
func TestPortStatsServesTheCheckpointsClaims(t *testing.T) {
	dir := t.TempDir()
	if err := mocknode.WriteProfile("disabled-port", dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	m := metrics.NewPlugin()
	reader := portcounters.NewReader(filepath.Join(dir, mocknode.SysDir))
	reader.Track([]portcounters.Port{{IBDev: "mlx5_0", Port: 1, LinkLayer: "InfiniBand"}})
	stats := newPortStats(reader, m, testclock.NewFakeClock(epoch))
	m.ServePortCounters("node-1", stats)
	cp := checkpoint.New("boot")
	cp.Claims = map[string]*checkpoint.Claim{"u1": {UID: "u1", Namespace: "team", Name: "trainer", Devices: []checkpoint.Device{
		{Device: "mlx5-0-p1", IBDev: "mlx5_0", Port: 1, Exclusive: true},
	}}}
	stats.committed(cp)
	cp.Claims = nil // nothing of cp is kept
	want := `
# HELP rdma_dra_port_claim_info [ALPHA] Always 1: a ResourceClaim prepared on this node holds the RDMA port, exclusive (the whole port) or shared (some of its shares).
# TYPE rdma_dra_port_claim_info gauge
rdma_dra_port_claim_info{claim="trainer",claim_namespace="team",ibdev="mlx5_0",mode="exclusive",node="node-1",port="1"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "rdma_dra_port_claim_info"); err != nil {
		t.Error(err)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "rdma_dra_port_link_downed_total" {
			continue
		}
		if len(f.GetMetric()) != 1 || !strings.Contains(f.GetMetric()[0].String(), `value:"trainer"`) {
			t.Errorf("link_downed series %v, want mlx5_0's, naming its claim", f.GetMetric())
		}
		return
	}
	t.Error("no link_downed series")
}

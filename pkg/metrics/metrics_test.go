package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/component-base/metrics/testutil"
)

func TestPluginMetrics(t *testing.T) {
	m := NewPlugin()
	m.ObservePrepare(3*time.Millisecond, 2, 1)
	m.ObserveUnprepare(time.Millisecond, 1, 0)
	m.SetDevices([]DeviceCount{{Mode: "exclusive", State: "free", Count: 3}, {Mode: "shared", State: "prepared", Count: 1}})
	m.SetDevices([]DeviceCount{{Mode: "exclusive", State: "prepared", Count: 4}})
	m.PublishError("discover")
	m.CheckpointError("save")
	m.CleanupRemoved("spec", 2)
	m.SetModel("partitionable")
	m.SetModel("legacy")

	want := `
# HELP rdma_dra_devices [ALPHA] Published devices by mode (exclusive, shared) and state (free, prepared).
# TYPE rdma_dra_devices gauge
rdma_dra_devices{mode="exclusive",state="prepared"} 4
# HELP rdma_dra_device_model [ALPHA] 1 for the device model this node publishes (partitionable or legacy).
# TYPE rdma_dra_device_model gauge
rdma_dra_device_model{model="legacy"} 1
# HELP rdma_dra_prepare_claims_total [ALPHA] ResourceClaims prepared, by result.
# TYPE rdma_dra_prepare_claims_total counter
rdma_dra_prepare_claims_total{result="error"} 1
rdma_dra_prepare_claims_total{result="success"} 2
# HELP rdma_dra_unprepare_claims_total [ALPHA] ResourceClaims unprepared, by result.
# TYPE rdma_dra_unprepare_claims_total counter
rdma_dra_unprepare_claims_total{result="error"} 0
rdma_dra_unprepare_claims_total{result="success"} 1
# HELP rdma_dra_publish_errors_total [ALPHA] Errors while discovering, building or publishing ResourceSlices, by stage.
# TYPE rdma_dra_publish_errors_total counter
rdma_dra_publish_errors_total{stage="discover"} 1
# HELP rdma_dra_checkpoint_errors_total [ALPHA] Checkpoint failures by operation (load, save, quarantine).
# TYPE rdma_dra_checkpoint_errors_total counter
rdma_dra_checkpoint_errors_total{op="save"} 1
# HELP rdma_dra_cleanup_removed_total [ALPHA] Leftovers of deleted claims removed by the cleanup loop, by kind (entry, spec).
# TYPE rdma_dra_cleanup_removed_total counter
rdma_dra_cleanup_removed_total{kind="spec"} 2
`
	names := []string{
		"rdma_dra_devices", "rdma_dra_device_model", "rdma_dra_prepare_claims_total",
		"rdma_dra_unprepare_claims_total", "rdma_dra_publish_errors_total",
		"rdma_dra_checkpoint_errors_total", "rdma_dra_cleanup_removed_total",
	}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	latency, err := testutil.GetHistogramVecFromGatherer(m.Registry(), "rdma_dra_prepare_duration_seconds", nil)
	if err != nil || len(latency) != 1 || latency.GetAggregatedSampleCount() != 1 {
		t.Errorf("prepare latency: %d series, %v, want one with 1 observation", len(latency), err)
	}

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, s := range []string{"# HELP rdma_dra_build_info [ALPHA] ", "rdma_dra_build_info{", "go_goroutines", "rdma_dra_prepare_duration_seconds_bucket"} {
		if !strings.Contains(rec.Body.String(), s) {
			t.Errorf("/metrics lacks %s", s)
		}
	}
}

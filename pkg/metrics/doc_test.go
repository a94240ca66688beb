package metrics

import (
	"errors"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/metricsdoc"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// TestDocMetricTables keeps the metric tables of the docs and the registered metrics one
// list: docs/kubelet-plugin.md documents every metric of the plugin with its type,
// stability level and labels, and docs/health.md's rows say the same of theirs.
func TestDocMetricTables(t *testing.T) {
	m := NewPlugin()
	// Every metric gets a series, so that the registry shows its labels.
	m.ObservePrepare(time.Millisecond, 1, 0)
	m.ObserveUnprepare(time.Millisecond, 1, 0)
	m.SetDevices([]DeviceCount{{Mode: "exclusive", State: "free", Count: 1}})
	m.SetPreparedClaims(1)
	m.Published()
	m.PublishError("discover")
	m.CheckpointError("save")
	m.CleanupRemoved("spec", 1)
	m.SetModel("partitionable")
	m.SetPortState("mlx5_0", 1, "ACTIVE")
	m.Republished("poll")
	m.ObserveRepublishLatency(time.Millisecond)
	m.RepublishDamped()
	m.ObserveClaimStatus(StatusWritten)
	m.SetClaimStatusPending(1)
	m.ObserveClaimStatusLag(time.Millisecond)
	m.ObserveAttach(errors.New("attach"), time.Millisecond)
	m.SetPortFlapping("mlx5_0", 1, true)
	m.ObservePortCounterRead(portcounters.Reading{Errors: 1})
	// Every port counter family gets a series too.
	reading := twoPorts()
	for i := range portcounters.NumCounters {
		reading.Ports[0].Has[i] = true
	}
	m.ServePortCounters("node-1", &fakeSource{reading: reading, stale: true,
		claims: []PortClaim{{IBDev: "mlx5_0", Port: 1, Namespace: "ns", Name: "claim", Exclusive: true}}})

	served, err := metricsdoc.Served(m.Registry(), m.Names())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		doc string
		all bool
	}{
		{"../../docs/kubelet-plugin.md", true},
		{"../../docs/health.md", false},
	} {
		t.Run(tt.doc, func(t *testing.T) {
			documented, err := metricsdoc.Documented(tt.doc, Namespace+"_")
			if err != nil {
				t.Fatal(err)
			}
			if len(documented) == 0 {
				t.Fatalf("%s documents no metric", tt.doc)
			}
			for _, err := range metricsdoc.Check(documented, served, tt.all) {
				t.Errorf("%s: %v", tt.doc, err)
			}
		})
	}
}

package metrics

import (
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// readerSource serves what its read returns and four claims: one exclusive, three shares.
type readerSource struct {
	read func() (portcounters.Reading, bool)
}

func (s readerSource) PortCounters() (portcounters.Reading, bool) { return s.read() }
func (s readerSource) PortClaims() []PortClaim {
	return []PortClaim{
		{IBDev: "mlx5_0", Port: 1, Namespace: "team-a", Name: "trainer-0", Exclusive: true},
		{IBDev: "mlx5_32", Port: 1, Namespace: "team-b", Name: "infer-0"},
		{IBDev: "mlx5_32", Port: 1, Namespace: "team-b", Name: "infer-1"},
		{IBDev: "mlx5_33", Port: 1, Namespace: "team-c", Name: "etl-0"},
	}
}

// BenchmarkPortCounterScrape is one scrape of /metrics on a 64-port node (the large mock
// profile's physical ports: 32 InfiniBand, 32 RoCE), the whole response encoded:
//
//   - read: every scrape reads sysfs, as one that finds no reading younger than
//     portcounters.DefaultMaxAge does (8 named counters and 19 or 29 hw_counters per
//     port, some 2,200 series);
//   - cached: the reading comes from the cache, as for a second scrape within that age.
//
// The rest of /metrics (the plugin's other metrics, the Go and process collectors) is
// in both.
func BenchmarkPortCounterScrape(b *testing.B) {
	p, err := mocknode.Lookup("large")
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	if err := p.Node().Write(dir, mocknode.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	reader := portcounters.NewReader(filepath.Join(dir, mocknode.SysDir))
	ports := make([]portcounters.Port, 64)
	for i := range ports {
		ll := "InfiniBand"
		if i >= 32 {
			ll = "Ethernet"
		}
		ports[i] = portcounters.Port{IBDev: fmt.Sprintf("mlx5_%d", i), Port: 1, LinkLayer: ll}
	}
	reader.Track(ports)
	cache := portcounters.NewCache(reader.Read, portcounters.CacheOptions{MaxAge: time.Hour})

	for _, tc := range []struct {
		name string
		read func() (portcounters.Reading, bool)
	}{
		{"read", func() (portcounters.Reading, bool) { return reader.Read(), false }},
		{"cached", cache.Get},
	} {
		b.Run(tc.name, func(b *testing.B) {
			m := NewPlugin()
			m.ServePortCounters("node-1", readerSource{read: tc.read})
			h := m.Handler()
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), `counter="np_cnp_sent"`) {
					b.Fatalf("status %d, %d bytes", rec.Code, rec.Body.Len())
				}
			}
		})
	}
}

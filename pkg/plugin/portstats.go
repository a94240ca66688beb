package plugin

import (
	"sync"

	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// portStats is what /metrics serves the port counters from (metrics.PortCounterSource):
// the published ports' counters, read when scraped through a cache that bounds how often
// and how long (portcounters.Cache), and the claims that hold each port as of the last
// commit of the checkpoint.
type portStats struct {
	cache *portcounters.Cache

	mu     sync.Mutex
	claims []metrics.PortClaim
}

// newPortStats serves the counters reader reads (the health monitor tells it the
// published ports after every scan), counting its reads in m.
func newPortStats(reader *portcounters.Reader, m *metrics.Plugin, c clock.Clock) *portStats {
	return &portStats{cache: portcounters.NewCache(reader.Read, portcounters.CacheOptions{Clock: c, Done: m.ObservePortCounterRead})}
}

// PortCounters implements metrics.PortCounterSource.
func (s *portStats) PortCounters() (portcounters.Reading, bool) { return s.cache.Get() }

// PortClaims implements metrics.PortCounterSource.
func (s *portStats) PortClaims() []metrics.PortClaim {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.claims
}

// committed takes the claims of a checkpoint as committed (checkpoint.Hooks.Committed,
// through DriverOptions.Committed); it keeps nothing of cp.
func (s *portStats) committed(cp *checkpoint.Checkpoint) {
	claims := portClaims(cp)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.claims = claims
}

// portClaims returns the claims that hold ports in cp: each device's port, every port of
// a legacy device, exclusive for a device that stands for the whole port. An admin-access
// allocation watches a device without holding it and is left out.
func portClaims(cp *checkpoint.Checkpoint) []metrics.PortClaim {
	var out []metrics.PortClaim
	for _, c := range cp.Claims {
		for _, d := range c.Devices {
			if d.AdminAccess {
				continue
			}
			if len(d.Ports) == 0 {
				out = append(out, metrics.PortClaim{IBDev: d.IBDev, Port: d.Port, Namespace: c.Namespace, Name: c.Name, Exclusive: d.Exclusive})
				continue
			}
			for _, p := range d.Ports {
				out = append(out, metrics.PortClaim{IBDev: p.IBDev, Port: p.Port, Namespace: c.Namespace, Name: c.Name})
			}
		}
	}
	return out
}

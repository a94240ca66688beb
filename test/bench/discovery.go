package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// DiscoveryPoint is the scan time of one node size.
type DiscoveryPoint struct {
	Ports   int     `json:"ports"`
	Scan    Summary `json:"scan"`
	PerPort float64 `json:"per_port_us"`
}

// measureDiscovery writes a mock node of each size in sizes below dir and times full
// scans of it with one Discoverer, as the plugin's rescans do: one warm-up scan, then
// scans until both minScans and minTime are reached.
func measureDiscovery(ctx context.Context, dir string, sizes []int, minScans int, minTime time.Duration) ([]DiscoveryPoint, error) {
	logger := klog.FromContext(ctx)
	var out []DiscoveryPoint
	for _, n := range sizes {
		nodeDir := filepath.Join(dir, fmt.Sprintf("node-%d", n))
		root, err := writeScaledNode(nodeDir, n)
		if err != nil {
			return nil, err
		}
		d := discovery.New(discovery.Options{SysfsRoot: root})
		if _, err := d.Discover(ctx); err != nil {
			return nil, fmt.Errorf("discover %d-port node: %w", n, err)
		}
		var samples []time.Duration
		start := time.Now()
		for len(samples) < minScans || time.Since(start) < minTime {
			t0 := time.Now()
			inv, err := d.Discover(ctx)
			samples = append(samples, time.Since(t0))
			if err != nil {
				return nil, fmt.Errorf("discover %d-port node: %w", n, err)
			}
			if len(inv.Ports) != n {
				return nil, fmt.Errorf("discover %d-port node: found %d ports", n, len(inv.Ports))
			}
		}
		s := Summarize(samples)
		out = append(out, DiscoveryPoint{Ports: n, Scan: s, PerPort: s.P50 * 1000 / float64(n)})
		logger.Info("Measured discovery", "ports", n, "scans", s.N, "p50ms", s.P50)
		if err := os.RemoveAll(nodeDir); err != nil {
			return nil, fmt.Errorf("remove %s: %w", nodeDir, err)
		}
	}
	return out, nil
}

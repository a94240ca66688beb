package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../.."

func fixtures(tb testing.TB) (*discovery.Inventory, map[string]*resourceapi.DeviceClass) {
	tb.Helper()
	inv, err := eightPortInventory(context.Background(), tb.TempDir())
	if err != nil {
		tb.Fatal(err)
	}
	classes, err := DeviceClasses(repoRoot)
	if err != nil {
		tb.Fatal(err)
	}
	return inv, classes
}

// BenchmarkAllocate1000Nodes is alloc_ms_per_pod_1000_nodes: the scheduler's DRA work
// for one pod with a one-share claim over 1000 8-port nodes that are 80% full, for the
// default model and the legacy models side by side, and the default model with a legacy
// resource of every port (migrated nodes). One op is one pod.
func BenchmarkAllocate1000Nodes(b *testing.B) {
	inv, classes := fixtures(b)
	for _, v := range append([]Variant{DefaultVariant, legacyResourceVariant}, comparedVariants...) {
		b.Run(v.Name, func(b *testing.B) {
			c, err := newCluster(inv, v, 1000, Fill, classes)
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			calls := 0
			b.ResetTimer()
			for b.Loop() {
				t, err := c.schedulePod(ctx)
				if err != nil {
					b.Fatal(err)
				}
				calls += t.Calls
			}
			b.ReportMetric(float64(calls)/float64(b.N), "nodes/op")
		})
	}
}

// BenchmarkDiscoverScaled is one full scan of mock nodes of growing size.
func BenchmarkDiscoverScaled(b *testing.B) {
	for _, n := range []int{8, 64, 320} {
		b.Run(fmt.Sprintf("ports=%d", n), func(b *testing.B) {
			root, err := writeScaledNode(filepath.Join(b.TempDir(), "node"), n)
			if err != nil {
				b.Fatal(err)
			}
			d := discovery.New(discovery.Options{SysfsRoot: root})
			ctx := context.Background()
			for b.Loop() {
				if _, err := d.Discover(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

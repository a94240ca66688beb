package plugin

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// benchDirEnv points the benchmarks' data and CDI directories at a file system of choice,
// e.g. a disk like the node's /var/lib/kubelet; by default they use the test's temporary
// directory.
const benchDirEnv = "RDMA_DRA_BENCH_DIR"

func BenchmarkPrepare1(b *testing.B) { benchmarkPrepare(b, 1) }
func BenchmarkPrepare8(b *testing.B) { benchmarkPrepare(b, 8) }

// benchmarkPrepare measures a prepare+unprepare cycle of a claim with n exclusive devices
// through the real code path: checkpoint saves with fsync, CDI spec write and removal,
// and the claim status apply against the fake API server. It reports the p50 and p99 of
// the cycle besides the mean.
func benchmarkPrepare(b *testing.B, n int) {
	h := newHarness(b, "dgx-h100")
	if dir := os.Getenv(benchDirEnv); dir != "" {
		var err error
		if h.dataDir, err = os.MkdirTemp(dir, "data-"); err != nil {
			b.Fatal(err)
		}
		if h.cdiDir, err = os.MkdirTemp(dir, "cdi-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(h.dataDir); _ = os.RemoveAll(h.cdiDir) })
	}
	d := h.driver()
	claim := h.claim("bench", exclusive(n))
	claims := []*resourceapi.ResourceClaim{claim}
	refs := []kubeletplugin.NamespacedObject{{UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}}}
	ctx := context.Background()
	durations := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		res, err := d.PrepareResourceClaims(ctx, claims)
		if err != nil || res[claim.UID].Err != nil {
			b.Fatalf("prepare: %v %v", err, res[claim.UID].Err)
		}
		if _, err := d.UnprepareResourceClaims(ctx, refs); err != nil {
			b.Fatalf("unprepare: %v", err)
		}
		durations = append(durations, time.Since(start))
		// The status writer runs behind the kubelet's back; the fake API server's
		// apply costs far more CPU than a real round trip, so it is kept out of the
		// measured cycles.
		b.StopTimer()
		d.status.pending.Wait()
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(durations)
	quantile := func(q float64) float64 {
		i := int(q * float64(len(durations)-1))
		return float64(durations[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(quantile(0.5), "p50-ms")
	b.ReportMetric(quantile(0.99), "p99-ms")
}

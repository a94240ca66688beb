package plugin

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
)

// benchDirEnv points the benchmarks' data and CDI directories at a file system of choice,
// e.g. a disk like the node's /var/lib/kubelet; by default they use the test's temporary
// directory.
const benchDirEnv = "RDMA_DRA_BENCH_DIR"

func BenchmarkPrepare1(b *testing.B) { benchmarkPrepare(b, 1, 1) }
func BenchmarkPrepare8(b *testing.B) { benchmarkPrepare(b, 1, 8) }

// BenchmarkPrepareConcurrent16 and ...Concurrent64 run prepare+unprepare cycles of 16 or
// 64 claims at once, one worker per claim as the kubelet's concurrent calls would, each
// claim with one share of a shared device (or eight, for ...8Dev).
func BenchmarkPrepareConcurrent16(b *testing.B)      { benchmarkPrepare(b, 16, 1) }
func BenchmarkPrepareConcurrent16_8Dev(b *testing.B) { benchmarkPrepare(b, 16, 8) }
func BenchmarkPrepareConcurrent64(b *testing.B)      { benchmarkPrepare(b, 64, 1) }

// benchmarkPrepare measures prepare+unprepare cycles through the real code path:
// checkpoint group commits, CDI spec writes and removals, and the claim status apply. With workers > 1 the b.N cycles are spread over that many
// concurrent workers, each with a claim of its own; devices > 1 gives each claim shares
// of that many ports (workers == 1: exclusive devices). It reports p50 and p99 of one
// cycle as a worker sees it, and cycles per second.
func benchmarkPrepare(b *testing.B, workers, devices int) {
	h := newHarness(b, "dgx-h100")
	if dir := os.Getenv(benchDirEnv); dir != "" {
		var err error
		//nolint:usetesting // b.TempDir cannot be put on the filesystem named by the environment.
		if h.dataDir, err = os.MkdirTemp(dir, "data-"); err != nil {
			b.Fatal(err)
		}
		//nolint:usetesting // on benchDirEnv's filesystem too, as above
		if h.cdiDir, err = os.MkdirTemp(dir, "cdi-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(h.dataDir); _ = os.RemoveAll(h.cdiDir) })
	}
	// The fake API server's server-side apply costs far more CPU than the request
	// does on a real node (where it is a round trip to another machine), and would
	// compete with the measured cycles for the CPU: the apply is still built, encoded
	// and sent, and answered at once.
	h.kube.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &resourceapi.ResourceClaim{}, nil
	})
	d := h.driver()
	var claims []*resourceapi.ResourceClaim
	for w := range workers {
		if workers == 1 {
			claims = append(claims, h.claim("bench", exclusive(devices)))
			break
		}
		var allocs []alloc
		for i := range devices {
			allocs = append(allocs, alloc{request: "rdma", device: fmt.Sprintf("mlx5-%d-p1-shared", i), shareID: fmt.Sprintf("%08d-0000-4000-8000-%012d", w, i)})
		}
		claims = append(claims, h.claim(fmt.Sprintf("bench-%d", w), allocs))
	}
	ctx := context.Background()
	var (
		mu        sync.Mutex
		durations = make([]time.Duration, 0, b.N)
		next      = make(chan struct{})
		wg        sync.WaitGroup
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for _, claim := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			refs := []kubeletplugin.NamespacedObject{{UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}}}
			for range next {
				t0 := time.Now()
				res, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{claim})
				if err != nil || res[claim.UID].Err != nil {
					b.Errorf("prepare: %v %v", err, res[claim.UID].Err)
					return
				}
				if _, err := d.UnprepareResourceClaims(ctx, refs); err != nil {
					b.Errorf("unprepare: %v", err)
					return
				}
				elapsed := time.Since(t0)
				mu.Lock()
				durations = append(durations, elapsed)
				mu.Unlock()
			}
		}()
	}
	for b.Loop() {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err := d.status.WaitIdle(context.Background()); err != nil {
		b.Fatal(err)
	}
	slices.Sort(durations)
	quantile := func(q float64) float64 {
		i := int(q * float64(len(durations)-1))
		return float64(durations[i]) / float64(time.Millisecond)
	}
	b.ReportMetric(quantile(0.5), "p50-ms")
	b.ReportMetric(quantile(0.99), "p99-ms")
	b.ReportMetric(float64(len(durations))/elapsed.Seconds(), "cycles/s")
}

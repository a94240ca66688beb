package plugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
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
	h.answerStatusAtOnce()
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

// answerStatusAtOnce makes the fake API server answer the claim status writes at once.
// Its server-side apply costs far more CPU than the request does on a real node (where
// it is a round trip to another machine), and would compete with the measured cycles
// for the CPU: the apply is still built, encoded and sent.
func (h *harness) answerStatusAtOnce() {
	h.kube.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &resourceapi.ResourceClaim{}, nil
	})
}

// benchRunDirEnv points the CDI specs and the device metadata files of the share
// benchmarks at a file system of choice, e.g. a tmpfs like a node's /var/run (their data
// directory stays in the test's temporary directory, like the node's disk); by default
// they use the test's temporary directory too.
const benchRunDirEnv = "RDMA_DRA_BENCH_RUN_DIR"

// BenchmarkPrepareShare1 is one prepare+unprepare cycle of a claim with one share of a
// shared device, the load of the goal prepare_p50_ratio_vs_reference_c1
// (docs/benchmarks.md), called on the driver directly with device metadata on: the
// plugin's own work per cycle. On a shared machine its wall time says little; cpu-ns/op
// and allocs/op say more, and the system calls per cycle most (strace -f -c on a test
// binary, two runs of different -test.benchtime, the difference divided), with
// RDMA_DRA_BENCH_RUN_DIR on a tmpfs as on a node.
func BenchmarkPrepareShare1(b *testing.B) { benchmarkPrepareShare(b, false) }

// BenchmarkNodePrepareShare1 is the cycle of BenchmarkPrepareShare1 as the kubelet makes
// it: over the DRA socket through the real helper, which gets the claim (from the fake
// API server) and writes the device metadata file and its CDI spec.
func BenchmarkNodePrepareShare1(b *testing.B) { benchmarkPrepareShare(b, true) }

// benchmarkPrepareShare runs the cycles of BenchmarkPrepareShare1, through the helper
// with viaHelper, and reports the process's CPU time per cycle.
func benchmarkPrepareShare(b *testing.B, viaHelper bool) {
	h := newHarness(b, "dgx-h100")
	runRoot := b.TempDir()
	if dir := os.Getenv(benchRunDirEnv); dir != "" {
		var err error
		//nolint:usetesting // b.TempDir cannot be put on the filesystem named by the environment.
		if runRoot, err = os.MkdirTemp(dir, "run-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(runRoot) })
	}
	h.cdiDir = mkdir(b, filepath.Join(runRoot, "cdi"))
	h.answerStatusAtOnce()
	d := h.driver()
	claim := h.claim("bench", []alloc{{request: "rdma", device: "mlx5-0-p1-shared", shareID: "00000000-0000-4000-8000-000000000001"}})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var prepare, unprepare func() error
	if viaHelper {
		client, _ := startMetadataHelperIn(b, ctx, h, d, "bench", runRoot)
		refs := []*drapbv1.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}
		prepare = func() error {
			resp, err := client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: refs})
			if err != nil {
				return err
			}
			if r := resp.Claims[string(claim.UID)]; r == nil || r.Error != "" || len(r.Devices) != 1 {
				return fmt.Errorf("answer %+v", r)
			}
			return nil
		}
		unprepare = func() error {
			resp, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: refs})
			if err != nil {
				return err
			}
			if r := resp.Claims[string(claim.UID)]; r == nil || r.Error != "" {
				return fmt.Errorf("answer %+v", r)
			}
			return nil
		}
	} else {
		// As with --device-metadata: the answers carry each device's metadata.
		d.metadataFiles = &MetadataFiles{DriverName: testDriver, CDIDir: h.cdiDir, DataDir: h.dataDir, RunDir: filepath.Join(runRoot, testDriver)}
		claims := []*resourceapi.ResourceClaim{claim}
		refs := []kubeletplugin.NamespacedObject{{UID: claim.UID, NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}}}
		prepare = func() error {
			res, err := d.PrepareResourceClaims(ctx, claims)
			if err == nil {
				err = res[claim.UID].Err
			}
			return err
		}
		unprepare = func() error {
			res, err := d.UnprepareResourceClaims(ctx, refs)
			if err == nil {
				err = res[claim.UID]
			}
			return err
		}
	}
	b.ReportAllocs()
	cpu0 := processCPU(b)
	for b.Loop() {
		if err := prepare(); err != nil {
			b.Fatalf("prepare: %v", err)
		}
		if err := unprepare(); err != nil {
			b.Fatalf("unprepare: %v", err)
		}
	}
	if err := d.status.WaitIdle(ctx); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	// The CPU time of the whole process (the helper's and the status writer's goroutines
	// included) moves far less than the wall clock on a shared machine.
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
}

// processCPU is the user and system CPU time the process has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

//go:build schedperf

package schedperf

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	draapi "k8s.io/dynamic-resource-allocation/api"
	"k8s.io/dynamic-resource-allocation/structured"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// TestMain registers scheduler_perf's flags (-perf-scheduling-label-filter,
// -data-items-dir, the logging flags) and parses them, as its own test packages do.
func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "scheduler_perf: %v\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// BenchmarkPerfScheduling runs the workloads of the config that Write generates with
// scheduler_perf: an in-process kube-apiserver on an etcd of its own (etcd from the
// local cluster's binary cache, which scheduler_perf finds on PATH) and scheduler per
// workload. The allocator is the one the 1.37 scheduler uses with the default features
// (incubating: partitionable devices and consumable capacity), as in upstream's dra
// topic.
func BenchmarkPerfScheduling(b *testing.B) {
	ctx := context.Background()
	repo, err := filepath.Abs("../../..")
	if err != nil {
		b.Fatal(err)
	}
	bins, err := controlplane.CachedBinaries(ctx, repo)
	if err != nil {
		b.Fatal(err)
	}
	b.Setenv("PATH", filepath.Dir(bins.Etcd)+string(os.PathListSeparator)+os.Getenv("PATH"))
	upstream, err := UpstreamTemplates(ctx, filepath.Join(repo, "test"))
	if err != nil {
		b.Fatal(err)
	}
	config, err := Write(ctx, Options{Repo: repo, Upstream: upstream, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	structured.EnableAllocators("incubating")
	defer structured.EnableAllocators()
	perf.RunBenchmarkPerfScheduling(b, config, topic, nil)
	if b.Failed() {
		return
	}
	dir := flag.Lookup("data-items-dir").Value.String()
	if dir == "" {
		b.Log("no -data-items-dir: the ratios are not written")
		return
	}
	// The make target says which scheduler it built; a run that measured the other
	// one must not write figures under the wrong name.
	scheduler := schedulerName()
	if want := os.Getenv("SCHEDPERF_SCHEDULER"); want != "" && want != scheduler {
		b.Fatalf("SCHEDPERF_SCHEDULER=%s, but the benchmark was built with the %s scheduler", want, scheduler)
	}
	r, err := WriteRatios(dir, scheduler)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s scheduler at %d nodes, ours / the reference's: %s", r.Scheduler, r.Nodes, r.Summary())
}

// schedulerName is "patched" when the benchmark was built with the allocator of
// upstreampatch (the copy of k8s.io/dynamic-resource-allocation that PatchedModfile's
// go.mod names), and "upstream" otherwise. A test binary carries no module information,
// so it is read from the library itself: only the patched one's devices have prepared
// CEL attributes.
func schedulerName() string {
	if _, ok := reflect.TypeFor[draapi.Device]().FieldByName("CELAttributes"); ok {
		return "patched"
	}
	return "upstream"
}

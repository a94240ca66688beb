// Command rdma-dra-schedperf-patch prepares the patched scheduler of the scheduler
// benchmark: a copy of k8s.io/dynamic-resource-allocation with the caches of
// test/scale/schedperf/upstreampatch applied, and a go.mod beside it that replaces the
// module with the copy. It prints that go.mod's path, for `go test -modfile`. Nothing of
// it is in what the project ships; `make bench-schedperf` runs it
// (docs/benchmarks-schedperf.md).
//
//	rdma-dra-schedperf-patch -out _output/schedperf-patched
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/rdma-dra/rdma-dra-driver/test/scale/schedperf"
)

func main() {
	wd, _ := os.Getwd()
	testModule := flag.String("test-module", wd, "the test module's directory (its go.mod is copied)")
	out := flag.String("out", "", "directory of the patched copy and its go.mod (replaced on every run)")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "rdma-dra-schedperf-patch: -out is required")
		os.Exit(2)
	}
	modfile, err := run(*testModule, *out)
	if err != nil {
		fmt.Fprintf(os.Stderr, "rdma-dra-schedperf-patch: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(modfile)
}

// run prepares the patched copy below out and returns the go.mod's path.
func run(testModule, out string) (string, error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := filepath.Abs(out)
	if err != nil {
		return "", err
	}
	return schedperf.PatchedModfile(ctx, testModule, dir)
}

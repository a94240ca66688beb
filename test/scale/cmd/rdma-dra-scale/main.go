// Command rdma-dra-scale runs the scheduler scale harness (package scale) and writes
// _output/bench/scale.json. `make bench-scale` builds kwok and runs it; see
// docs/benchmarks.md, "Scale with the real scheduler".
//
//	rdma-dra-scale [-nodes 1000] [-pods 200] [-fills 0,0.5,0.9] [-smoke]
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	_ "net/http/pprof" // the profiles -pprof-addr serves
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/scale"
)

func main() {
	klog.InitFlags(nil)
	wd, _ := os.Getwd()
	o := scale.Options{}
	flag.StringVar(&o.Repo, "repo", wd, "repository root")
	out := flag.String("out", "", "output directory; default <repo>/_output/bench")
	flag.StringVar(&o.Kwok, "kwok", "", "the kwok binary; default <repo>/_output/scale/bin/kwok (make bench-scale builds it)")
	nodes := flag.String("nodes", "1000", "cluster sizes, comma-separated, each measured on a fresh cluster")
	fills := flag.String("fills", "0,0.5,0.9", "fill levels of the main scenarios, comma-separated")
	flag.IntVar(&o.Pods, "pods", 0, "pods per burst; default 200, 20 with -smoke")
	flag.IntVar(&o.LatencyPods, "latency-pods", 0, "pods created at -latency-rate for the latency; default 50, 10 with -smoke")
	flag.Float64Var(&o.LatencyRate, "latency-rate", 10, "pods per second of the latency phase")
	flag.DurationVar(&o.Idle, "idle", 0, "how long the plugins stay idle for their idle traffic; default 60s, 5s with -smoke")
	flag.IntVar(&o.Flaps, "flaps", 0, "port flaps for the flap traffic; default 10, 2 with -smoke")
	flag.BoolVar(&o.Smoke, "smoke", false, "a quick run that checks the harness end to end (CI), not the numbers")
	report := flag.String("report", "", "the report to write; default <repo>/docs/benchmarks-scale.md, none with -smoke")
	fromJSON := flag.String("from-json", "", "measure nothing: render the report from this scale.json, or from several, comma-separated, of runs that measured different sizes (merged into -out's scale.json first)")
	pprofAddr := flag.String("pprof-addr", "", "serve the harness's own profiles (net/http/pprof) on this loopback address, e.g. 127.0.0.1:6060")
	flag.Parse()
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr); err != nil {
			fmt.Fprintf(os.Stderr, "rdma-dra-scale: %v\n", err)
			os.Exit(1)
		}
	}
	if *fromJSON != "" {
		if err := rerender(o.Repo, *fromJSON, *out, *report); err != nil {
			fmt.Fprintf(os.Stderr, "rdma-dra-scale: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(o, *out, *nodes, *fills, *report); err != nil {
		fmt.Fprintf(os.Stderr, "rdma-dra-scale: %v\n", err)
		os.Exit(1)
	}
}

// servePprof serves net/http/pprof's handlers on addr, which must be a loopback address:
// the profiles are for whoever runs the harness.
func servePprof(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("-pprof-addr %q: want a loopback address and port, e.g. 127.0.0.1:6060", addr)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("-pprof-addr: %w", err)
	}
	go func() { _ = http.Serve(l, nil) }()
	return nil
}

// pick is the flag's value, or the default for a normal or a smoke run.
func pick[T comparable](v T, normal, smoke T, isSmoke bool) T {
	var zero T
	switch {
	case v != zero:
		return v
	case isSmoke:
		return smoke
	}
	return normal
}

// rerender writes the report of existing results: one scale.json, or several
// (comma-separated) of runs that measured different sizes, merged and written to
// out's scale.json so that the report's source is one file again.
func rerender(repo, from, out, report string) error {
	var runs []*scale.Results
	for _, path := range strings.Split(from, ",") {
		r, err := scale.ReadResults(path)
		if err != nil {
			return err
		}
		runs = append(runs, r)
	}
	r := runs[0]
	if len(runs) > 1 {
		var err error
		if r, err = scale.Merge(runs...); err != nil {
			return fmt.Errorf("-from-json %s: %w", from, err)
		}
		path := filepath.Join(pick(out, filepath.Join(repo, "_output", "bench"), "", false), "scale.json")
		if err := r.Write(path); err != nil {
			return err
		}
		fmt.Printf("wrote %s (%d points from %d runs)\n", path, len(r.Points), len(runs))
	}
	return scale.WriteReport(r, pick(report, filepath.Join(repo, "docs", "benchmarks-scale.md"), "", false))
}

func run(o scale.Options, out, nodes, fills, report string) error {
	var err error
	if o.Repo, err = filepath.Abs(o.Repo); err != nil {
		return fmt.Errorf("repository path: %w", err)
	}
	if _, err := os.Stat(filepath.Join(o.Repo, "test", "go.mod")); err != nil {
		return fmt.Errorf("%s is not the repository root (no test/go.mod); pass -repo", o.Repo)
	}
	if o.Nodes, err = scale.ParseNodes(nodes); err != nil {
		return err
	}
	if o.Fills, err = scale.ParseFills(fills); err != nil {
		return err
	}
	if !slices.Contains(o.Fills, scale.HeadlineFill) {
		return fmt.Errorf("-fills %s: must include %g, the fill of the headline figures", fills, scale.HeadlineFill)
	}
	o.Out = pick(out, filepath.Join(o.Repo, "_output", "bench"), "", false)
	o.Kwok = pick(o.Kwok, filepath.Join(o.Repo, "_output", "scale", "bin", "kwok"), "", false)
	if _, err := os.Stat(o.Kwok); err != nil {
		return fmt.Errorf("kwok binary: %w (make bench-scale builds it)", err)
	}
	if o.KwokVersion, o.KwokStages, err = scale.ResolveKwok(context.Background(), o.Repo); err != nil {
		return err
	}
	o.Pods = pick(o.Pods, 200, 20, o.Smoke)
	o.LatencyPods = pick(o.LatencyPods, 50, 10, o.Smoke)
	o.Idle = pick(o.Idle, 60*time.Second, 5*time.Second, o.Smoke)
	o.Flaps = pick(o.Flaps, 10, 2, o.Smoke)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx = klog.NewContext(ctx, klog.Background().WithName("scale"))
	r, runErr := scale.Run(ctx, o)
	path := filepath.Join(o.Out, "scale.json")
	if err := r.Write(path); err != nil {
		return err
	}
	keys := r.Headline()
	names := make([]string, 0, len(keys))
	for k := range keys {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Printf("%s: %.3g\n", k, keys[k])
	}
	fmt.Printf("wrote %s (%d points)\n", path, len(r.Points))
	if runErr != nil || o.Smoke {
		return runErr
	}
	report = pick(report, filepath.Join(o.Repo, "docs", "benchmarks-scale.md"), "", false)
	if err := scale.WriteReport(r, report); err != nil {
		return err
	}
	fmt.Printf("wrote %s\n", report)
	return nil
}

// Command rdma-dra-bench measures the driver's performance figures and writes
// _output/bench/results.json, docs/benchmarks.md and its figures (docs/benchmarks-*.svg).
// `make bench-report` runs it; see docs/benchmarks.md. With -from-json it measures
// nothing and renders the report and figures of an earlier run's results.json.
//
//	rdma-dra-bench [-smoke] [-repo DIR] [-idle 60s] [-flips 6] [-report FILE]
//	rdma-dra-bench -from-json _output/bench/results.json [-repo DIR] [-report FILE]
//
// BENCH_PLUGIN_BIN=/path/rdma-dra-kubeletplugin measures a prebuilt (say, patched) plugin
// instead of building the tree.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/bench"
)

// envOr returns the environment variable's value, or def when it is unset or empty.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func main() {
	klog.InitFlags(nil)
	wd, _ := os.Getwd()
	repo := flag.String("repo", envOr("BENCH_REPO", wd), "repository root (env BENCH_REPO)")
	smoke := flag.Bool("smoke", os.Getenv("BENCH_SMOKE") == "1", "quick run that checks the harness, not the numbers (env BENCH_SMOKE=1)")
	idle := flag.Duration("idle", 0, "how long the idle plugin runs before its RSS is read; default 60s, 3s with -smoke (env BENCH_IDLE)")
	flips := flag.Int("flips", 0, "port state flips for event_to_slice_ms; default 6, 2 with -smoke (env BENCH_FLIPS)")
	report := flag.String("report", "", "the report to write; default <repo>/docs/benchmarks.md, and none with -smoke (env BENCH_REPORT)")
	fromJSON := flag.String("from-json", "", "measure nothing: render the report from this results.json")
	flag.Parse()
	if *fromJSON != "" {
		if err := rerender(*repo, *fromJSON, *report); err != nil {
			fmt.Fprintf(os.Stderr, "rdma-dra-bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*repo, *smoke, *idle, *flips, *report); err != nil {
		fmt.Fprintf(os.Stderr, "rdma-dra-bench: %v\n", err)
		os.Exit(1)
	}
}

func run(repo string, smoke bool, idle time.Duration, flips int, report string) error {
	repo, err := filepath.Abs(repo)
	if err != nil {
		return fmt.Errorf("repository path: %w", err)
	}
	if _, err := os.Stat(filepath.Join(repo, "test", "go.mod")); err != nil {
		return fmt.Errorf("%s is not the repository root (no test/go.mod); pass -repo", repo)
	}
	if idle == 0 {
		idle = durationEnv("BENCH_IDLE", map[bool]time.Duration{false: 60 * time.Second, true: 3 * time.Second}[smoke])
	}
	if flips == 0 {
		flips = intEnv("BENCH_FLIPS", map[bool]int{false: 6, true: 2}[smoke])
	}
	if report == "" {
		report = os.Getenv("BENCH_REPORT")
	}
	if report == "" && !smoke {
		report = filepath.Join(repo, "docs", "benchmarks.md")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	out := filepath.Join(repo, "_output", "bench")
	res := bench.Run(ctx, bench.Options{Repo: repo, Out: out, Smoke: smoke, Idle: idle, Flips: flips, PluginBinary: os.Getenv("BENCH_PLUGIN_BIN")})
	jsonPath := filepath.Join(out, "results.json")
	if err := res.WriteJSON(jsonPath); err != nil {
		return err
	}
	logger.Info("Wrote results", "path", jsonPath)
	if report != "" {
		if err := bench.WriteReport(res, report); err != nil {
			return err
		}
		logger.Info("Wrote report", "path", report)
	}
	printSummary(res)
	if missing := res.MissingKeys(); len(missing) > 0 {
		why := append([]string(nil), res.Meta.Errors...)
		for _, k := range missing {
			if reason := res.NotMeasured(k); reason != "" {
				why = append(why, k+" not measured: "+reason)
			}
		}
		return fmt.Errorf("no value for %s: %s", strings.Join(missing, ", "), strings.Join(why, "; "))
	}
	return nil
}

// printSummary prints one line per headline figure: the goals in force with whether
// each is met, then the context figures, which carry no goal.
func printSummary(res *bench.Results) {
	value := func(key string, v *float64, unit string) string {
		switch {
		case v != nil:
			return fmt.Sprintf("%.4g %s", *v, unit)
		case res.NotMeasured(key) != "":
			return "not measured: " + res.NotMeasured(key)
		default:
			return "missing"
		}
	}
	for _, g := range res.Goals() {
		v := value(g.Key, g.Value, g.Unit)
		if g.Value != nil {
			v += fmt.Sprintf(" (goal %s %g, met: %v)", map[bool]string{true: "≥", false: "≤"}[g.AtLeast], g.Limit, g.Met())
		}
		fmt.Printf("%-42s %s\n", g.Key, v)
	}
	for _, c := range res.Context() {
		fmt.Printf("%-42s %s (context, no goal)\n", c.Key, value(c.Key, c.Value, c.Unit))
	}
}

// rerender writes the report of an earlier run.
func rerender(repo, path, report string) error {
	res, err := bench.ReadResults(path)
	if err != nil {
		return err
	}
	if report == "" {
		report = filepath.Join(repo, "docs", "benchmarks.md")
	}
	return bench.WriteReport(res, report)
}

func durationEnv(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func intEnv(name string, def int) int {
	var n int
	if _, err := fmt.Sscanf(os.Getenv(name), "%d", &n); err == nil && n > 0 {
		return n
	}
	return def
}

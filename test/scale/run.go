package scale

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/bench"
)

// Options configure a run.
type Options struct {
	// Repo is the repository root; Out receives scale.json and logs/.
	Repo, Out string
	// Kwok is the kwok binary; KwokVersion its version, for the results; KwokStages
	// the stage files it runs with (see KwokModule).
	Kwok, KwokVersion string
	KwokStages        []string
	// Nodes are the cluster sizes, each measured on a fresh cluster.
	Nodes []int
	// Pods is the burst size of a point; LatencyPods are then created at LatencyRate
	// per second for the latency.
	Pods, LatencyPods int
	LatencyRate       float64
	// Fills are the fill levels of the main scenarios.
	Fills []float64
	// Idle is how long the plugins are left alone for their idle traffic; Flaps is the
	// number of port flaps.
	Idle  time.Duration
	Flaps int
	// Smoke marks a quick run (CI): the harness works, the numbers mean little.
	Smoke bool
}

// step is a model, a fill level and the scenarios measured in that state, by a
// scheduler with percentageOfNodesToScore percentage (0: the default).
type step struct {
	model      Model
	fill       float64
	scenarios  []Scenario
	percentage int
}

// plan is the order of the measurements on one cluster: the default model at each fill
// level with the extended resource beside it; the scenarios that need room (4 ports on
// one NUMA node) on the empty cluster; the others at HeadlineFill; then the legacy and
// the per-NIC model at HeadlineFill; the few-attributes model (what the attributes
// cost) with shares; last the default model again with the scheduler tuned
// (TunedPercentage), shares and the extended resource side by side. The legacy model has
// no whole ports in its default (shared) mode, so it is measured with shares only; the
// per-NIC model has no shares. Above maxLegacyNodes nodes the legacy model is left out.
func plan(fills []float64, nodes int) []step {
	var out []step
	for _, f := range fills {
		s := step{model: ModelDefault, fill: f, scenarios: []Scenario{ScenarioShare, ScenarioExtendedResource, ScenarioWholePort}}
		if f == 0 {
			s.scenarios = append(s.scenarios, ScenarioNUMA)
		}
		if f == HeadlineFill {
			s.scenarios = append(s.scenarios, ScenarioFirstAvailable, ScenarioGPUNIC)
		}
		out = append(out, s)
	}
	if nodes <= maxLegacyNodes {
		out = append(out, step{model: ModelLegacy, fill: HeadlineFill, scenarios: []Scenario{ScenarioShare}})
	}
	return append(out,
		step{model: ModelPerNIC, fill: HeadlineFill, scenarios: []Scenario{ScenarioWholePort}},
		step{model: ModelFewAttributes, fill: HeadlineFill, scenarios: []Scenario{ScenarioShare}},
		step{model: ModelDefault, fill: HeadlineFill, percentage: TunedPercentage,
			scenarios: []Scenario{ScenarioShare, ScenarioExtendedResource, ScenarioWholePort}},
	)
}

// maxLegacyNodes is the largest cluster the legacy model is measured on. It publishes
// 16 single-share devices per port, 128 per node: at 5,000 nodes 640,000 devices, and
// while the nodes switched to it the API server grew past 13 GiB and this 24 GiB machine
// ran out of memory (2026-11-26). The default model at 5,000 nodes took about 12 GiB in
// all.
const maxLegacyNodes = 1000

// Run measures every cluster size and returns what it measured so far, with the first
// error.
func Run(ctx context.Context, o Options) (*Results, error) {
	start := time.Now()
	r := &Results{Meta: Meta{
		Smoke: o.Smoke, Started: start.UTC().Format(time.RFC3339), Commit: bench.GitCommit(o.Repo),
		GoVersion: runtime.Version(), CPUs: runtime.NumCPU(), CPUModel: bench.CPUModel(), MemoryGiB: memTotalGiB(),
		LoadBefore: bench.LoadAverage(), Kwok: o.KwokVersion,
	}}
	r.Scenarios = []Scenario{ScenarioShare, ScenarioExtendedResource, ScenarioWholePort, ScenarioNUMA, ScenarioFirstAvailable, ScenarioGPUNIC}
	var err error
	for _, n := range o.Nodes {
		if err = runSize(ctx, o, n, r); err != nil {
			err = fmt.Errorf("%d nodes: %w", n, err)
			break
		}
	}
	r.Meta.Seconds = time.Since(start).Seconds()
	r.Meta.LoadAfter = bench.LoadAverage()
	return r, err
}

// runSize measures one cluster size on a fresh cluster.
func runSize(ctx context.Context, o Options, nodes int, r *Results) error {
	logger := klog.FromContext(ctx)
	work := filepath.Join(o.Out, "scale-work", strconv.Itoa(nodes))
	logs := filepath.Join(o.Out, "logs", "scale-"+strconv.Itoa(nodes))
	if err := os.RemoveAll(work); err != nil {
		return fmt.Errorf("clean %s: %w", work, err)
	}
	c, err := startCluster(ctx, o, nodes, work, logs)
	if err != nil {
		return err
	}
	defer c.Stop(ctx)
	if r.Meta.Kubernetes == "" {
		if v, err := c.cp.Client.Discovery().ServerVersion(); err == nil {
			r.Meta.Kubernetes = v.GitVersion
		}
	}
	b := c.startBinder(ctx)
	published := map[Model]bool{}
	for i, st := range plan(o.Fills, nodes) {
		if c.model != st.model {
			if err := c.publish(ctx, st.model); err != nil {
				return err
			}
		}
		restarted := c.percentage != st.percentage
		if restarted {
			if err := c.restartScheduler(ctx, st.percentage); err != nil {
				return err
			}
		}
		if !published[st.model] || restarted {
			if !published[st.model] {
				f, err := c.sliceFigures(ctx)
				if err != nil {
					return err
				}
				r.Slices = append(r.Slices, f)
			}
			published[st.model] = true
			// Warm up: the first pods of a model or a scheduler compile the classes'
			// CEL and fill the scheduler's caches, as on a cluster that has been running.
			if _, err := c.measure(ctx, b, st.scenarios[0], 0, Options{Pods: 10}, fmt.Sprintf("w%d", i)); err != nil {
				return fmt.Errorf("warm-up in the %s model: %w", st.model, err)
			}
		}
		if err := c.fill(ctx, st.fill); err != nil {
			return err
		}
		for j, s := range st.scenarios {
			if s.GPUs {
				if err := c.publishGPUs(ctx, true); err != nil {
					return err
				}
			}
			p, err := c.measure(ctx, b, s, st.fill, o, fmt.Sprintf("p%d-%d", i, j))
			if err != nil {
				return fmt.Errorf("%s in the %s model at fill %.2f: %w", s.Name, st.model, st.fill, err)
			}
			r.Points = append(r.Points, p)
			if s.GPUs {
				if err := c.publishGPUs(ctx, false); err != nil {
					return err
				}
			}
		}
		if err := c.unfill(ctx); err != nil {
			return err
		}
	}
	api, err := c.measureAPI(ctx, o.Idle, o.Flaps)
	if err != nil {
		return err
	}
	r.API = append(r.API, api)
	r.Memory = append(r.Memory, c.peakMemory())
	logger.Info("Cluster size done", "nodes", nodes)
	return nil
}

// peakMemory reads each program's peak RSS (VmHWM).
func (c *Cluster) peakMemory() Memory {
	m := Memory{Nodes: len(c.nodes), PeakMB: map[string]float64{}}
	pids := map[string]int{"harness (plugins, load)": os.Getpid(), "kube-scheduler": c.sched.Pid(),
		"kube-controller-manager": c.kcm.Pid(), "kwok": c.kwok.Pid()}
	for name, pid := range c.cp.Pids() {
		pids[name] = pid
	}
	for name, pid := range pids {
		if v, err := bench.ProcStatusMiB(pid, "VmHWM"); err == nil {
			m.PeakMB[name] = v
		}
	}
	m.PeakMB["kube-scheduler"] = max(m.PeakMB["kube-scheduler"], c.schedPeakMB)
	return m
}

// memTotalGiB is the machine's memory.
func memTotalGiB() float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024 / 1024
		}
	}
	return 0
}

// ParseFills reads a comma-separated list of fill levels in [0, 0.95].
func ParseFills(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || v < 0 || v > 0.95 {
			return nil, fmt.Errorf("fill level %q: want a number from 0 to 0.95", f)
		}
		out = append(out, v)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ParseNodes reads a comma-separated list of cluster sizes.
func ParseNodes(s string) ([]int, error) {
	var out []int
	var errs []error
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			errs = append(errs, fmt.Errorf("cluster size %q: want a positive number of nodes", f))
			continue
		}
		out = append(out, v)
	}
	return out, errors.Join(errs...)
}

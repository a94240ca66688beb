package schedperf

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// The goals of the scheduler's cost (docs/benchmarks-schedperf.md): ours / the
// reference driver's throughput in one run at FullLabel's size, kept as a benchmark.
const (
	WholePortGoal = 0.9
	ShareGoal     = 0.75
)

// topic names scheduler_perf's results file: BenchmarkPerfScheduling_benchmark_<topic>_<time>.json.
const topic = "rdma"

// RatiosFile is the name of the file WriteRatios writes into the results directory.
const RatiosFile = "ratios.json"

// Ratios are the figures of one scheduler_perf run at its largest size: each workload's
// throughput and each side's ratio to the reference driver's at the same fill. The four
// headline ratios are the default model's; a figure the run did not measure is null.
type Ratios struct {
	Nodes int `json:"nodes"`
	// Scheduler says which scheduler ran: "upstream", or "patched" with the caches of
	// upstreampatch.
	Scheduler      string   `json:"scheduler"`
	WholePortEmpty *float64 `json:"whole_port_empty_ratio"`
	WholePortHalf  *float64 `json:"whole_port_half_ratio"`
	ShareEmpty     *float64 `json:"share_empty_ratio"`
	ShareHalf      *float64 `json:"share_half_ratio"`
	Goals          Goals    `json:"goals"`
	// Throughput is SchedulingThroughput's average (pods/s) by "<side>_<fill>".
	Throughput map[string]float64 `json:"throughput"`
	// Ratio is the ratio of every side of ours to the reference at the same fill, by
	// "<side>_<fill>": the alternatives beside the default model.
	Ratio map[string]float64 `json:"ratios"`
	// AttemptP50 is the median duration of a scheduling attempt that scheduled its pod
	// (ms), by "<side>_<fill>": steadier than a throughput sampled once a second.
	AttemptP50 map[string]float64 `json:"attempt_p50_ms"`
}

// Goals are the goals and whether this run met them (null: not measured).
type Goals struct {
	WholePort float64          `json:"whole_port_min"`
	Share     float64          `json:"share_min"`
	Met       map[string]*bool `json:"met"`
}

// dataItems is the part of scheduler_perf's results file (BenchmarkPerfScheduling_
// benchmark_<topic>_<time>.json) that Ratios reads.
type dataItems struct {
	DataItems []struct {
		Data   map[string]float64 `json:"data"`
		Labels map[string]string  `json:"labels"`
	} `json:"dataItems"`
}

// ComputeRatios reads the throughputs of scheduler_perf's results file data and the
// ratios of the run's largest size. scheduler names the scheduler that ran.
func ComputeRatios(data []byte, scheduler string) (*Ratios, error) {
	var items dataItems
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf("decode scheduler_perf's results: %w", err)
	}
	bySize := map[int]map[string]float64{}
	attempts := map[int]map[string]float64{}
	prefix := "BenchmarkPerfScheduling/" + TestCase + "/"
	for _, it := range items.DataItems {
		metric := it.Labels["Metric"]
		attempt := metric == "scheduler_scheduling_attempt_duration_seconds" && it.Labels["result"] == "scheduled"
		if metric != "SchedulingThroughput" && !attempt {
			continue
		}
		name, ok := strings.CutPrefix(it.Labels["Name"], prefix)
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, "/test")
		side, fill, n, err := ParseWorkloadName(name)
		if err != nil {
			return nil, fmt.Errorf("scheduler_perf's results: %w", err)
		}
		if attempt {
			if p50, ok := it.Data["Perc50"]; ok {
				if attempts[n] == nil {
					attempts[n] = map[string]float64{}
				}
				attempts[n][side+"_"+fill] = p50
			}
			continue
		}
		avg, ok := it.Data["Average"]
		if !ok {
			return nil, fmt.Errorf("scheduler_perf's results: workload %q has no average throughput", name)
		}
		if bySize[n] == nil {
			bySize[n] = map[string]float64{}
		}
		bySize[n][side+"_"+fill] = avg
	}
	if len(bySize) == 0 {
		return nil, fmt.Errorf("scheduler_perf's results hold no SchedulingThroughput of %s", TestCase)
	}
	r := &Ratios{Nodes: slices.Max(slices.Collect(maps.Keys(bySize))), Scheduler: scheduler, Ratio: map[string]float64{},
		Goals: Goals{WholePort: WholePortGoal, Share: ShareGoal, Met: map[string]*bool{}}}
	r.Throughput = bySize[r.Nodes]
	r.AttemptP50 = attempts[r.Nodes]
	if r.AttemptP50 == nil {
		r.AttemptP50 = map[string]float64{}
	}
	for key, ours := range r.Throughput {
		side, fill, _ := strings.Cut(key, "_")
		ref, ok := r.Throughput["reference_"+fill]
		if side == "reference" || !ok || ref <= 0 {
			continue
		}
		r.Ratio[key] = ours / ref
	}
	headline := []struct {
		key  string
		to   **float64
		goal float64
	}{
		{"port_empty", &r.WholePortEmpty, WholePortGoal},
		{"port_half", &r.WholePortHalf, WholePortGoal},
		{"share_empty", &r.ShareEmpty, ShareGoal},
		{"share_half", &r.ShareHalf, ShareGoal},
	}
	for _, h := range headline {
		v, ok := r.Ratio[h.key]
		if !ok {
			r.Goals.Met[h.key] = nil
			continue
		}
		*h.to = &v
		met := v >= h.goal
		r.Goals.Met[h.key] = &met
	}
	return r, nil
}

// WriteRatios computes the ratios of the newest results file of scheduler_perf in dir
// (the -data-items-dir of the run) and writes them to dir/RatiosFile.
func WriteRatios(dir, scheduler string) (*Ratios, error) {
	matches, err := filepath.Glob(filepath.Join(dir, "BenchmarkPerfScheduling_benchmark_"+topic+"_*.json"))
	if err != nil {
		return nil, fmt.Errorf("find scheduler_perf's results in %s: %w", dir, err)
	}
	if len(matches) == 0 {
		return nil, fmt.Errorf("no results of scheduler_perf in %s", dir)
	}
	// The file names end in an RFC 3339 time, which sorts as text.
	newest := slices.Max(matches)
	data, err := os.ReadFile(newest)
	if err != nil {
		return nil, fmt.Errorf("read scheduler_perf's results: %w", err)
	}
	r, err := ComputeRatios(data, scheduler)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", newest, err)
	}
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode the ratios: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, RatiosFile), append(out, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("write the ratios: %w", err)
	}
	return r, nil
}

// Summary is the ratios in one line, sorted by name, for the benchmark's log.
func (r *Ratios) Summary() string {
	var parts []string
	for _, key := range slices.Sorted(maps.Keys(r.Ratio)) {
		parts = append(parts, fmt.Sprintf("%s %.2f", key, r.Ratio[key]))
	}
	return strings.Join(parts, ", ")
}

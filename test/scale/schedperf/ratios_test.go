package schedperf

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// results is a scheduler_perf results file with the given SchedulingThroughput
// averages by workload name, and one item of another metric that must be ignored.
func results(t *testing.T, throughput map[string]float64) []byte {
	t.Helper()
	type item struct {
		Data   map[string]float64 `json:"data"`
		Unit   string             `json:"unit"`
		Labels map[string]string  `json:"labels"`
	}
	var items []item
	for name, avg := range throughput {
		items = append(items, item{Data: map[string]float64{"Average": avg, "Perc50": avg + 1}, Unit: "pods/s",
			Labels: map[string]string{"Metric": "SchedulingThroughput", "Name": "BenchmarkPerfScheduling/" + TestCase + "/" + name + "/test"}})
	}
	for name, avg := range throughput {
		// The median attempt that scheduled its pod is the throughput's tenfold here;
		// the one of attempts that did not is left out.
		attempt := func(result string, p50 float64) item {
			return item{Data: map[string]float64{"Average": 99, "Perc50": p50}, Unit: "ms",
				Labels: map[string]string{"Metric": "scheduler_scheduling_attempt_duration_seconds", "result": result, "Name": "BenchmarkPerfScheduling/" + TestCase + "/" + name + "/test"}}
		}
		items = append(items, attempt("scheduled", avg*10), attempt("unschedulable", avg*10+1))
	}
	items = append(items, item{Data: map[string]float64{"Average": 99}, Unit: "ms",
		Labels: map[string]string{"Metric": "scheduler_plugin_execution_duration_seconds", "Name": "BenchmarkPerfScheduling/" + TestCase + "/port_empty_1000nodes/test"}})
	data, err := json.Marshal(map[string]any{"version": "v1", "dataItems": items})
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestComputeRatios(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	b := func(v bool) *bool { return &v }
	approx := cmpopts.EquateApprox(0, 1e-9)
	tests := []struct {
		name       string
		throughput map[string]float64
		want       *Ratios
		wantErr    string
	}{{
		name: "the largest size, every fill",
		throughput: map[string]float64{
			"reference_empty_1000nodes": 40, "share_empty_1000nodes": 20, "port_empty_1000nodes": 36, "capacity-share_empty_1000nodes": 30,
			"reference_half_1000nodes": 40, "share_half_1000nodes": 32, "port_half_1000nodes": 30,
			// The smoke size of the same run is left out.
			"reference_half_50nodes": 100, "share_half_50nodes": 100,
		},
		want: &Ratios{Nodes: 1000, Scheduler: "upstream",
			WholePortEmpty: f(0.9), WholePortHalf: f(0.75), ShareEmpty: f(0.5), ShareHalf: f(0.8),
			Goals: Goals{WholePort: 0.9, Share: 0.75, Met: map[string]*bool{
				"port_empty": b(true), "port_half": b(false), "share_empty": b(false), "share_half": b(true)}},
			Throughput: map[string]float64{"reference_empty": 40, "share_empty": 20, "port_empty": 36, "capacity-share_empty": 30,
				"reference_half": 40, "share_half": 32, "port_half": 30},
			Ratio: map[string]float64{"share_empty": 0.5, "port_empty": 0.9, "capacity-share_empty": 0.75, "share_half": 0.8, "port_half": 0.75},
			AttemptP50: map[string]float64{"reference_empty": 400, "share_empty": 200, "port_empty": 360, "capacity-share_empty": 300,
				"reference_half": 400, "share_half": 320, "port_half": 300},
		},
	}, {
		name:       "smoke: half only, the empty figures null",
		throughput: map[string]float64{"reference_half_50nodes": 50, "port_half_50nodes": 25, "share_half_50nodes": 50},
		want: &Ratios{Nodes: 50, Scheduler: "upstream", WholePortHalf: f(0.5), ShareHalf: f(1),
			Goals: Goals{WholePort: 0.9, Share: 0.75, Met: map[string]*bool{
				"port_empty": nil, "port_half": b(false), "share_empty": nil, "share_half": b(true)}},
			Throughput: map[string]float64{"reference_half": 50, "port_half": 25, "share_half": 50},
			Ratio:      map[string]float64{"port_half": 0.5, "share_half": 1},
			AttemptP50: map[string]float64{"reference_half": 500, "port_half": 250, "share_half": 500},
		},
	}, {
		name:       "a misnamed workload",
		throughput: map[string]float64{"reference-empty-1000": 40},
		wantErr:    `workload "reference-empty-1000" is not <side>_<fill>_<N>nodes`,
	}, {
		name:    "no throughput",
		wantErr: "no SchedulingThroughput",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ComputeRatios(results(t, tt.throughput), "upstream")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, approx); diff != "" {
				t.Errorf("ratios (-want +got):\n%s", diff)
			}
		})
	}
}

// TestWriteRatios: the newest results file of the directory is read, and the file has
// the four headline keys, null when not measured.
func TestWriteRatios(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string][]byte{
		"BenchmarkPerfScheduling_benchmark_rdma_2026-11-27T10:00:00Z.json": results(t, map[string]float64{"reference_half_50nodes": 10, "port_half_50nodes": 10}),
		"BenchmarkPerfScheduling_benchmark_rdma_2026-11-27T11:00:00Z.json": results(t, map[string]float64{"reference_half_50nodes": 10, "port_half_50nodes": 5}),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := WriteRatios(dir, "patched"); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, RatiosFile))
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"whole_port_empty_ratio": nil, "whole_port_half_ratio": 0.5, "share_empty_ratio": nil, "share_half_ratio": nil, "scheduler": "patched"}
	for key, w := range want {
		v, ok := got[key]
		if !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, w)
		}
	}
	if _, err := WriteRatios(t.TempDir(), "upstream"); err == nil || !strings.Contains(err.Error(), "no results of scheduler_perf") {
		t.Errorf("an empty directory: error %v", err)
	}
}

func TestParseWorkloadName(t *testing.T) {
	for _, s := range sides() {
		for _, sz := range sizes {
			for _, f := range sz.fills {
				name := WorkloadName(s.name, f.name, sz.nodes)
				side, fill, nodes, err := ParseWorkloadName(name)
				if err != nil || side != s.name || fill != f.name || nodes != sz.nodes {
					t.Errorf("ParseWorkloadName(%q) = %q, %q, %d, %v", name, side, fill, nodes, err)
				}
			}
		}
	}
	for _, bad := range []string{"share", "share_half", "share_half_50", "share_half_xnodes", "_half_50nodes", "share__50nodes"} {
		if _, _, _, err := ParseWorkloadName(bad); err == nil {
			t.Errorf("ParseWorkloadName(%q) accepted", bad)
		}
	}
}

package scale

import (
	"slices"
	"strings"
	"testing"
)

// run is the results of one run that measured sizes, one share point per size.
func run(started string, sizes ...int) *Results {
	r := &Results{Meta: Meta{Started: started, Kubernetes: "v1.37.1", CPUs: 2}, Scenarios: []Scenario{ScenarioShare}}
	for _, n := range sizes {
		r.Points = append(r.Points, Point{Nodes: n, Scenario: ScenarioShare.Name, Model: ModelDefault, Fill: HeadlineFill, PodsPerSec: float64(n)})
		r.API = append(r.API, APIFigures{Nodes: n})
		r.Memory = append(r.Memory, Memory{Nodes: n})
	}
	return r
}

func TestMerge(t *testing.T) {
	for _, tc := range []struct {
		name      string
		runs      []*Results
		wantSizes [][]int
		wantErr   string
	}{
		{name: "two runs", runs: []*Results{run("late", 5000), run("early", 100, 1000)},
			wantSizes: [][]int{{5000}, {100, 1000}}},
		{name: "one run", runs: []*Results{run("only", 100)}, wantSizes: [][]int{{100}}},
		{name: "a merged run merged again", runs: []*Results{mustMerge(t, run("a", 100), run("b", 1000)), run("c", 5000)},
			wantSizes: [][]int{{100}, {1000}, {5000}}},
		{name: "the same size twice", runs: []*Results{run("a", 100, 1000), run("b", 1000)}, wantErr: "runs 1 and 2 both measured 1000 nodes"},
		{name: "smoke beside full", runs: []*Results{run("a", 100), func() *Results { r := run("b", 30); r.Meta.Smoke = true; return r }()},
			wantErr: "run 2 (started b) is a smoke run"},
		{name: "other Kubernetes", runs: []*Results{run("a", 100), func() *Results { r := run("b", 30); r.Meta.Kubernetes = "v1.34.4"; return r }()},
			wantErr: "run 2 measured Kubernetes v1.34.4"},
		{name: "nothing", wantErr: "no results"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Merge(tc.runs...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var sizesOfRuns [][]int
			for _, m := range got.Runs {
				sizesOfRuns = append(sizesOfRuns, m.Sizes)
			}
			if !slices.EqualFunc(sizesOfRuns, tc.wantSizes, slices.Equal) {
				t.Errorf("runs measured %v, want %v", sizesOfRuns, tc.wantSizes)
			}
			var all []int
			for _, s := range tc.wantSizes {
				all = append(all, s...)
			}
			slices.Sort(all)
			if s := sizes(got); !slices.Equal(s, all) {
				t.Errorf("sizes %v, want %v", s, all)
			}
			for name, nodes := range map[string][]int{"points": pointNodes(got.Points), "api": apiNodes(got.API), "memory": memoryNodes(got.Memory)} {
				if !slices.Equal(nodes, all) {
					t.Errorf("%s of %v nodes, want %v in order", name, nodes, all)
				}
			}
			if len(got.Scenarios) != 1 {
				t.Errorf("%d scenarios, want the one both runs had", len(got.Scenarios))
			}
		})
	}
}

func mustMerge(t *testing.T, runs ...*Results) *Results {
	t.Helper()
	r, err := Merge(runs...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func pointNodes(ps []Point) (out []int) {
	for _, p := range ps {
		out = append(out, p.Nodes)
	}
	return out
}

func apiNodes(as []APIFigures) (out []int) {
	for _, a := range as {
		out = append(out, a.Nodes)
	}
	return out
}

func memoryNodes(ms []Memory) (out []int) {
	for _, m := range ms {
		out = append(out, m.Nodes)
	}
	return out
}

// TestReportNamesEveryRun: a report of merged results says which run measured which
// size; one of a single run keeps its one line.
func TestReportNamesEveryRun(t *testing.T) {
	merged := mustMerge(t, run("2026-11-28T00:00:00Z", 100, 1000), run("2026-11-28T01:00:00Z", 5000))
	text := RenderReport(merged)
	for _, want := range []string{
		"Measured in 2 runs, each cluster size in one of them:",
		"- 100 and 1,000 nodes: 2026-11-28T00:00:00Z on 2 ×",
		"- 5,000 nodes: 2026-11-28T01:00:00Z on 2 ×",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if single := RenderReport(run("2026-11-28T00:00:00Z", 100)); !strings.Contains(single, "Measured 2026-11-28T00:00:00Z on 2 ×") || strings.Contains(single, "runs, each") {
		t.Errorf("the report of one run does not say where it was measured in one line:\n%.600s", single)
	}
}

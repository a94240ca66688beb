package bench

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
)

// retiredGoals are the figures that were goals once and are context now: at the
// client's own rate limit they measure the API server and the limiter, and the
// allocation time is the scheduler's.
var retiredGoals = []string{"prepare_p99_ms", "prepare_p99_ms_8dev", "prepare_per_sec", "alloc_ms_per_pod_1000_nodes"}

// headlineJSONKeys are the top-level keys of results.json that hold a figure.
func headlineJSONKeys(t *testing.T) []string {
	t.Helper()
	data, err := json.Marshal(&Results{})
	if err != nil {
		t.Fatal(err)
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		t.Fatal(err)
	}
	delete(top, "meta")
	delete(top, "details")
	return slices.Sorted(maps.Keys(top))
}

// TestHeadlineKeys checks that Goals and Context together list every headline figure of
// results.json exactly once, and that each entry's value is the figure of its own key.
func TestHeadlineKeys(t *testing.T) {
	keys := headlineJSONKeys(t)
	// Every key gets a value of its own, so a Value bound to the wrong field shows.
	in := map[string]float64{}
	for i, k := range keys {
		in[k] = float64(i + 1)
	}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatal(err)
	}
	listed := map[string]int{}
	check := func(list, key string, v *float64) {
		listed[key]++
		want, ok := in[key]
		switch {
		case !ok:
			t.Errorf("%s lists %s, which results.json does not write", list, key)
		case v == nil:
			t.Errorf("%s: %s has no value after reading results.json", list, key)
		case *v != want:
			t.Errorf("%s: %s has the value of another key (%g, want %g)", list, key, *v, want)
		}
	}
	for _, g := range r.Goals() {
		check("Goals", g.Key, g.Value)
	}
	for _, c := range r.Context() {
		check("Context", c.Key, c.Value)
		if c.Why == "" {
			t.Errorf("Context: %s does not say why it is context", c.Key)
		}
	}
	for _, k := range keys {
		if listed[k] != 1 {
			t.Errorf("%s is listed %d times in Goals and Context, want once", k, listed[k])
		}
	}
	if missing := r.MissingKeys(); len(missing) != 0 {
		t.Errorf("MissingKeys = %v with every figure set", missing)
	}
}

// TestRetiredGoals checks that the retired figures are context, not goals, and that a
// figure draws no goal line for them.
func TestRetiredGoals(t *testing.T) {
	r := &Results{}
	var goals, context []string
	for _, g := range r.Goals() {
		goals = append(goals, g.Key)
	}
	for _, c := range r.Context() {
		context = append(context, c.Key)
	}
	for _, k := range retiredGoals {
		t.Run(k, func(t *testing.T) {
			if slices.Contains(goals, k) {
				t.Errorf("%s is a goal", k)
			}
			if !slices.Contains(context, k) {
				t.Errorf("%s is not in Context", k)
			}
			if _, err := goalLimit(k); err == nil {
				t.Errorf("goalLimit(%s) has a limit", k)
			}
		})
	}
}

// TestReportMarks renders the report of several result sets and checks which rows of
// the Goals table are missed, and that no row of the Context table is met or missed.
func TestReportMarks(t *testing.T) {
	// The figures of the full run of 2026-11-24 on fa8bf24.
	run := func(r *Results) {
		r.PrepareP99MS, r.PrepareP99MS8Dev, r.PreparePerSec = ptr(320.6), ptr(323), ptr(49.99)
		r.AllocMSPerPod1000Nodes = ptr(48.17)
		r.PrepareP50RatioVsReferenceC1, r.CyclesRatioVsReferenceDefaultLimits, r.StatusUpdatesDropped = ptr(0.9333), ptr(0.9997), ptr(0)
		r.AttachDetachP50MS, r.AttachDetachP99MS = ptr(20.1), ptr(40.07)
		r.DiscoveryMSLarge, r.EventToSliceMS, r.SliceBytesPerNode, r.IdleRSSMiB = ptr(65.46), ptr(509.1), ptr(16611), ptr(47.49)
	}
	allMet := func(r *Results) {
		run(r)
		r.PrepareP50RatioVsReferenceC1, r.DiscoveryMSLarge, r.SliceBytesPerNode, r.IdleRSSMiB = ptr(0.8), ptr(40), ptr(16000), ptr(30)
	}
	tests := []struct {
		name       string
		set        func(*Results)
		wantMissed []string
		wantMarks  map[string]string // the last column of some goals' rows
	}{
		{
			name:       "the run of 2026-11-24",
			set:        run,
			wantMissed: []string{"prepare_p50_ratio_vs_reference_c1", "discovery_ms_large", "slice_bytes_per_node", "idle_rss_mib"},
			// A tie at the client limit meets the cycles goal.
			wantMarks: map[string]string{"cycles_ratio_vs_reference_default_limits": "met"},
		},
		{
			name: "context figures far off, goals met",
			set: func(r *Results) {
				allMet(r)
				r.PrepareP99MS, r.PrepareP99MS8Dev, r.PreparePerSec, r.AllocMSPerPod1000Nodes = ptr(1e6), ptr(1e6), ptr(0.1), ptr(1e6)
			},
		},
		{
			name:       "cycles below the tie",
			set:        func(r *Results) { allMet(r); r.CyclesRatioVsReferenceDefaultLimits = ptr(0.97) },
			wantMissed: []string{"cycles_ratio_vs_reference_default_limits"},
		},
		{
			name:      "a goal without a value",
			set:       func(r *Results) { allMet(r); r.IdleRSSMiB = nil },
			wantMarks: map[string]string{"idle_rss_mib": "no value"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sampleResults()
			tt.set(r)
			goals, context := reportTables(t, renderReport(r))
			var missed []string
			for _, g := range r.Goals() {
				row, ok := goals[g.Key]
				if !ok {
					t.Errorf("the Goals table has no row for %s", g.Key)
					continue
				}
				if mark := row[len(row)-1]; mark == "**missed**" {
					missed = append(missed, g.Key)
				}
			}
			if !slices.Equal(missed, tt.wantMissed) {
				t.Errorf("missed %v, want %v", missed, tt.wantMissed)
			}
			for k, want := range tt.wantMarks {
				if row := goals[k]; len(row) == 0 || row[len(row)-1] != want {
					t.Errorf("%s row %q, want the mark %q", k, row, want)
				}
			}
			for _, c := range r.Context() {
				row, ok := context[c.Key]
				if !ok {
					t.Errorf("the Context table has no row for %s", c.Key)
					continue
				}
				if _, ok := goals[c.Key]; ok {
					t.Errorf("%s has a row in the Goals table", c.Key)
				}
				for _, cell := range row {
					if strings.Contains(cell, "missed") || cell == "met" {
						t.Errorf("context row of %s is marked: %q", c.Key, row)
					}
				}
				if row[len(row)-1] != c.Why {
					t.Errorf("context row of %s ends in %q, want why %q", c.Key, row[len(row)-1], c.Why)
				}
			}
		})
	}
}

// reportTables reads the rows of the report's Goals and Context tables, by key.
func reportTables(t *testing.T, report string) (goals, context map[string][]string) {
	t.Helper()
	section := func(heading string) map[string][]string {
		_, after, ok := strings.Cut(report, "\n## "+heading+"\n")
		if !ok {
			t.Fatalf("the report has no %s section", heading)
		}
		body, _, _ := strings.Cut(after, "\n## ")
		rows := map[string][]string{}
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, "| `") {
				continue
			}
			cells := strings.Split(strings.Trim(line, "|"), " | ")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			rows[strings.Trim(cells[0], "`")] = cells[1:]
		}
		return rows
	}
	return section("Goals"), section("Context")
}

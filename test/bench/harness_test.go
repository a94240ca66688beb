package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestSummarize(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = 100 - i // 100..1, unsorted on purpose
	}
	tests := []struct {
		name string
		in   []time.Duration
		want Summary
	}{
		{"empty", nil, Summary{}},
		{"one", ms(7), Summary{N: 1, Mean: 7, P50: 7, P90: 7, P99: 7, Max: 7}},
		{"hundred", ms(hundred...), Summary{N: 100, Mean: 50.5, P50: 50, P90: 90, P99: 99, Max: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.in); got != tt.want {
				t.Errorf("Summarize = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestGoalMet(t *testing.T) {
	tests := []struct {
		name string
		goal Goal
		want bool
	}{
		{"no value", Goal{Limit: 5}, false},
		{"ceiling met", Goal{Limit: 5, Value: ptr(5)}, true},
		{"ceiling missed", Goal{Limit: 5, Value: ptr(5.1)}, false},
		{"floor met", Goal{Limit: 300, AtLeast: true, Value: ptr(300)}, true},
		{"floor missed", Goal{Limit: 300, AtLeast: true, Value: ptr(299)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.goal.Met(); got != tt.want {
				t.Errorf("Met = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestFeasibleNodesToFind(t *testing.T) {
	for _, tt := range []struct{ nodes, want int }{{50, 50}, {100, 100}, {250, 120}, {1000, 420}, {5000, 500}, {100000, 5000}} {
		t.Run(fmt.Sprint(tt.nodes), func(t *testing.T) {
			if got := feasibleNodesToFind(tt.nodes); got != tt.want {
				t.Errorf("feasibleNodesToFind(%d) = %d, want %d", tt.nodes, got, tt.want)
			}
		})
	}
}

// TestScaledNode discovers every node size the report uses and checks the port count.
func TestScaledNode(t *testing.T) {
	for _, n := range []int{1, 8, 64, 320} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			root, err := writeScaledNode(filepath.Join(t.TempDir(), "node"), n)
			if err != nil {
				t.Fatal(err)
			}
			inv, err := discovery.New(discovery.Options{SysfsRoot: root}).Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Ports) != n {
				t.Errorf("discovered %d ports, want %d", len(inv.Ports), n)
			}
		})
	}
	if _, err := scaledNode(65); err == nil {
		t.Error("scaledNode(65) succeeded, want an error")
	}
}

// TestCluster checks the fill and that every model schedules pods.
func TestCluster(t *testing.T) {
	inv, classes := fixtures(t)
	for _, v := range append([]Variant{DefaultVariant}, comparedVariants...) {
		t.Run(v.Name, func(t *testing.T) {
			c, err := newCluster(inv, v, 10, Fill, classes)
			if err != nil {
				t.Fatal(err)
			}
			units := 10 * 8 * v.Shares
			taken := c.State.AllocatedDevices.Len() + c.State.AllocatedSharedDeviceIDs.Len()
			if want := int(Fill * float64(units)); taken != want {
				t.Errorf("%d units taken, want %d", taken, want)
			}
			for range 3 {
				if _, err := c.schedulePod(context.Background()); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.State.AllocatedDevices.Len() + c.State.AllocatedSharedDeviceIDs.Len(); got != taken+3 {
				t.Errorf("%d units taken after 3 pods, want %d", got, taken+3)
			}
		})
	}
}

func TestSliceSizes(t *testing.T) {
	inv, _ := fixtures(t)
	sizes, err := measureSliceSizes(inv, append([]Variant{DefaultVariant}, comparedVariants...))
	if err != nil {
		t.Fatal(err)
	}
	devices := map[string]int{}
	for _, s := range sizes {
		devices[s.Variant.Name] = s.Devices
		if s.Bytes <= 0 || s.Slices <= 0 {
			t.Errorf("%s: %d slices, %d bytes", s.Variant.Name, s.Slices, s.Bytes)
		}
	}
	want := map[string]int{DefaultVariant.Name: 16, "partitionable, 64 shares": 16, "legacy, 8 share devices": 64, "legacy, 64 share devices": 512}
	for name, n := range want {
		if devices[name] != n {
			t.Errorf("%s: %d devices, want %d", name, devices[name], n)
		}
	}
}

// sampleResults is a complete result set for the report tests.
func sampleResults() *Results {
	load := func(c int) LoadResult {
		return LoadResult{Concurrency: c, Devices: 1, Cycles: 100, Seconds: 1, PerSec: float64(100 * c),
			Prepare: Summary{N: 100, P50: 1, P99: 2}, Unprepare: Summary{N: 100, P50: 1, P99: 1}}
	}
	p1, p8 := load(16), load(16)
	alloc := func(v Variant, nodes int) AllocPoint {
		return AllocPoint{Variant: v, Nodes: nodes, Pods: 10, PerPod: Summary{N: 10, Mean: float64(nodes) / 100}, NodesTried: 100, PerNodeUS: 10,
			FilterMS: float64(nodes) / 200}
	}
	r := &Results{
		PrepareP99MS: ptr(2), PrepareP99MS8Dev: ptr(3), PreparePerSec: ptr(400), DiscoveryMSLarge: ptr(20),
		EventToSliceMS: ptr(900), SliceBytesPerNode: ptr(20000), AllocMSPerPod1000Nodes: ptr(10), IdleRSSMiB: ptr(30),
		PrepareP50RatioVsReferenceC1: ptr(0.9), CyclesRatioVsReferenceDefaultLimits: ptr(1.1), StatusUpdatesDropped: ptr(0),
		AttachDetachP50MS: ptr(4), AttachDetachP99MS: ptr(9),
		Meta: Meta{Started: "2026-01-02T03:04:05Z", Commit: "abc", PluginSource: "working tree", GoVersion: "go1.26", CPUs: 2, CPUModel: "cpu"},
	}
	r.Details = Details{
		Discovery:  []DiscoveryPoint{{Ports: 8, Scan: Summary{P50: 1}}, {Ports: 320, Scan: Summary{P50: 20}}},
		SliceSizes: []SliceSize{{Variant: DefaultVariant, Slices: 2, Devices: 16, Bytes: 20000}},
		AllocNodes: []AllocPoint{alloc(DefaultVariant, 100), alloc(DefaultVariant, 1000)},
		Prepare1:   &p1, Prepare8: &p8, Throughput: []LoadResult{load(1), load(64)},
		Event: &EventResult{RescanInterval: "30s (default)", Flips: 2, Latency: Summary{P50: 900}},
		Idle:  &IdleResult{Seconds: 60, RSSMiB: 30},
		Attach: &AttachResult{Cycles: 200, Warmup: 3, Seconds: 1, GIDIndex: 7, LoadAverage: 0.5,
			Attach: Summary{N: 200, P50: 3, P99: 7}, Detach: Summary{N: 200, P50: 1, P99: 2}, AttachDetach: Summary{N: 200, P50: 4, P99: 9}},
		Reference: &ReferenceComparison{Reference: "ref@v1", Rounds: 2, LoadSeconds: 3,
			DriverPrepareP50C1: []float64{4, 5}, ReferencePrepareP50C1: []float64{5, 6},
			DriverCycles: []float64{70, 72}, ReferenceCycles: []float64{60, 62}, StatusDrainMS: []float64{1, 2}, StatusChecked: 64},
	}
	for _, v := range comparedVariants {
		r.Details.AllocModels = append(r.Details.AllocModels, alloc(v, 1000))
	}
	return r
}

func TestWriteReport(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "benchmarks.md")
	r := sampleResults()
	if err := WriteReport(r, path); err != nil {
		t.Fatal(err)
	}
	first, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range r.MissingKeys() {
		t.Errorf("sampleResults lacks %s", k)
	}
	for _, g := range r.Goals() {
		if !strings.Contains(string(first), "`"+g.Key+"`") {
			t.Errorf("report lacks key %s", g.Key)
		}
	}
	for _, c := range r.Context() {
		if !strings.Contains(string(first), "`"+c.Key+"`") {
			t.Errorf("report lacks key %s", c.Key)
		}
	}
	for _, fig := range []string{figThroughput, figDiscovery, figAlloc, figModels} {
		if !strings.Contains(string(first), "]("+fig+")") {
			t.Errorf("report does not show %s", fig)
		}
		if _, err := os.Stat(filepath.Join(dir, fig)); err != nil {
			t.Error(err)
		}
	}
	if err := WriteReport(r, path); err != nil {
		t.Fatal(err)
	}
	second, _ := os.ReadFile(path)
	if !bytes.Equal(first, second) {
		t.Error("the same results gave two different reports")
	}
	if missing := r.MissingKeys(); len(missing) != 0 {
		t.Errorf("MissingKeys = %v, want none", missing)
	}
	r.IdleRSSMiB = nil
	if missing := r.MissingKeys(); len(missing) != 1 || missing[0] != "idle_rss_mib" {
		t.Errorf("MissingKeys = %v, want [idle_rss_mib]", missing)
	}
}

func TestWriteReportKeepsHandWrittenPart(t *testing.T) {
	hand := handWrittenMarker + "\n\n## Controller at 1,000 nodes\n\nmeasured by hand\n"
	tests := []struct {
		name     string
		existing string // "" for no file
		wantTail string // what follows the generated report
	}{
		{"no report yet", "", ""},
		{"a report without a hand-written part", "# Benchmarks\n\nold figures\n", ""},
		{"a report with a hand-written part", "# Benchmarks\n\nold figures\n\n" + hand, "\n" + hand},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "benchmarks.md")
			if tt.existing != "" {
				if err := os.WriteFile(path, []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := sampleResults()
			want := renderReport(r) + tt.wantTail
			// Twice: the second write must keep the part once, not add it again.
			for range 2 {
				if err := WriteReport(r, path); err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != want {
					t.Fatalf("report ends in %q, want %q", tail(string(got), 120), tail(want, 120))
				}
			}
		})
	}
}

func tail(s string, n int) string {
	return s[max(len(s)-n, 0):]
}

func TestPlainNumbers(t *testing.T) {
	if got, want := plainNumbers("a 1.01e+03 ms, 2.064e+04 bytes, 3.5 ms, x1e+3y"), "a 1010 ms, 20640 bytes, 3.5 ms, x1e+3y"; got != want {
		t.Errorf("plainNumbers = %q, want %q", got, want)
	}
}

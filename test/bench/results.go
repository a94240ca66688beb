package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Results is _output/bench/results.json: the headline figures at the top level (null
// when the step that measures one failed; Meta.Errors says why), then how they were
// measured.
type Results struct {
	PrepareP99MS           *float64 `json:"prepare_p99_ms"`
	PrepareP99MS8Dev       *float64 `json:"prepare_p99_ms_8dev"`
	PreparePerSec          *float64 `json:"prepare_per_sec"`
	DiscoveryMSLarge       *float64 `json:"discovery_ms_large"`
	EventToSliceMS         *float64 `json:"event_to_slice_ms"`
	SliceBytesPerNode      *float64 `json:"slice_bytes_per_node"`
	AllocMSPerPod1000Nodes *float64 `json:"alloc_ms_per_pod_1000_nodes"`
	IdleRSSMiB             *float64 `json:"idle_rss_mib"`
	// One pod's macvlan attach+detach by pkg/netattach (netattach.go).
	AttachDetachP50MS *float64 `json:"attach_detach_p50_ms"`
	AttachDetachP99MS *float64 `json:"attach_detach_p99_ms"`
	// The comparison with the reference driver (reference.go).
	PrepareP50RatioVsReferenceC1        *float64 `json:"prepare_p50_ratio_vs_reference_c1"`
	CyclesRatioVsReferenceDefaultLimits *float64 `json:"cycles_ratio_vs_reference_default_limits"`
	StatusUpdatesDropped                *float64 `json:"status_updates_dropped"`

	Meta    Meta    `json:"meta"`
	Details Details `json:"details"`
}

// Meta describes the run.
type Meta struct {
	Smoke   bool    `json:"smoke"`
	Started string  `json:"started"`
	Seconds float64 `json:"seconds"`
	Commit  string  `json:"commit"`
	// PluginSource says which tree the plugin binary was built from.
	PluginSource string `json:"plugin_source"`
	GoVersion    string `json:"go_version"`
	CPUs         int    `json:"cpus"`
	CPUModel     string `json:"cpu_model"`
	// LoadBefore and LoadAfter are the 1-minute load averages around the run: the
	// machine may be shared.
	LoadBefore float64  `json:"load_before"`
	LoadAfter  float64  `json:"load_after"`
	Errors     []string `json:"errors,omitempty"`
}

// Details are the measurements behind the headline figures.
type Details struct {
	Discovery   []DiscoveryPoint     `json:"discovery"`
	SliceSizes  []SliceSize          `json:"slice_sizes"`
	StoredBytes int                  `json:"slice_bytes_stored,omitempty"`
	AllocNodes  []AllocPoint         `json:"alloc_by_nodes"`
	AllocModels []AllocPoint         `json:"alloc_by_model"`
	Prepare1    *LoadResult          `json:"prepare_1dev,omitempty"`
	Prepare8    *LoadResult          `json:"prepare_8dev,omitempty"`
	Throughput  []LoadResult         `json:"throughput"`
	Event       *EventResult         `json:"event,omitempty"`
	Idle        *IdleResult          `json:"idle,omitempty"`
	Reference   *ReferenceComparison `json:"reference,omitempty"`
	Attach      *AttachResult        `json:"netattach,omitempty"`
}

// IdleResult is the plugin's memory after an idle period.
type IdleResult struct {
	Seconds float64 `json:"seconds"`
	RSSMiB  float64 `json:"rss_mib"`
	// LoadedRSSMiB is the RSS of the plugin that served the prepare load, for contrast.
	LoadedRSSMiB float64 `json:"loaded_rss_mib,omitempty"`
}

// Goal is one headline figure and its goal.
type Goal struct {
	Key   string
	What  string
	Unit  string
	Limit float64
	// AtLeast is true for figures that must reach Limit, false for ceilings.
	AtLeast bool
	Value   *float64
}

// Met reports whether the value meets the goal; false when there is no value.
func (g Goal) Met() bool {
	if g.Value == nil {
		return false
	}
	if g.AtLeast {
		return *g.Value >= g.Limit
	}
	return *g.Value <= g.Limit
}

// Goals lists the headline figures in report order.
func (r *Results) Goals() []Goal {
	return []Goal{
		{"prepare_p99_ms", "p99 NodePrepareResources, 1-device claims, 16 concurrent", "ms", 5, false, r.PrepareP99MS},
		{"prepare_p99_ms_8dev", "p99 NodePrepareResources, 8-device claims, 16 concurrent", "ms", 10, false, r.PrepareP99MS8Dev},
		{"prepare_per_sec", "claims prepared and unprepared per second, 64 concurrent", "1/s", 300, true, r.PreparePerSec},
		{"attach_detach_p99_ms", "p99 attach+detach of one pod's macvlan (2 addresses, 1 route, emulated GIDs), no checkpoint", "ms", 50, false, r.AttachDetachP99MS},
		{"discovery_ms_large", "one full discovery, 64 ports + 256 VFs", "ms", 50, false, r.DiscoveryMSLarge},
		{"event_to_slice_ms", "port state change to updated ResourceSlice (median)", "ms", 1500, false, r.EventToSliceMS},
		{"slice_bytes_per_node", "JSON size of an 8-port node's ResourceSlices", "bytes", 16384, false, r.SliceBytesPerNode},
		{"alloc_ms_per_pod_1000_nodes", "allocation time per pod, 1000 nodes × 8 ports, 80% full", "ms", 5, false, r.AllocMSPerPod1000Nodes},
		{"idle_rss_mib", "plugin RSS after idling, 8-port node", "MiB", 40, false, r.IdleRSSMiB},
		{"prepare_p50_ratio_vs_reference_c1", "prepare p50 / dra-example-driver's, 1 concurrent, both at 50/100 QPS/burst", "×", 1, false, r.PrepareP50RatioVsReferenceC1},
		{"cycles_ratio_vs_reference_default_limits", "cycles/s (status backlog included) / dra-example-driver's, 16 concurrent, 50/100", "×", 1, true, r.CyclesRatioVsReferenceDefaultLimits},
		{"status_updates_dropped", "claim status updates lost over the whole run", "", 0, false, r.StatusUpdatesDropped},
	}
}

// MissingKeys lists the headline keys without a value: those of the goals, then
// attach_detach_p50_ms, a headline figure without a goal of its own.
func (r *Results) MissingKeys() []string {
	var out []string
	for _, g := range r.Goals() {
		if g.Value == nil {
			out = append(out, g.Key)
		}
	}
	if r.AttachDetachP50MS == nil {
		out = append(out, "attach_detach_p50_ms")
	}
	return out
}

// NotMeasured is why the figure of a headline key was left out on purpose (the
// machine cannot measure it), or "" when it was measured or failed.
func (r *Results) NotMeasured(key string) string {
	switch key {
	case "attach_detach_p50_ms", "attach_detach_p99_ms":
		if a := r.Details.Attach; a != nil {
			return a.NotMeasured
		}
	}
	return ""
}

// WriteJSON writes the results, indented, to path.
func (r *Results) WriteJSON(path string) error {
	return WriteJSONFile(path, r)
}

// WriteJSONFile writes v as indented JSON to path, creating its directory.
func WriteJSONFile(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// ReadResults reads a results.json written by WriteJSON.
func ReadResults(path string) (*Results, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	var r Results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return &r, nil
}

func ptr(v float64) *float64 { return &v }

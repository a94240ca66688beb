package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Results is _output/bench/results.json: the headline figures at the top level (null
// when the step that measures one failed; Meta.Errors says why), then how they were
// measured. Goals and Context (goals.go) say which of them carry a goal.
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

package scale

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// HeadlineFill is the fill level of the headline figures: a half-full cluster.
const HeadlineFill = 0.5

// Results is scale.json.
type Results struct {
	Meta      Meta           `json:"meta"`
	Scenarios []Scenario     `json:"scenarios"`
	Points    []Point        `json:"points"`
	Slices    []SliceFigures `json:"slices"`
	API       []APIFigures   `json:"api"`
	// Memory is each process's peak resident memory in MiB, per cluster size.
	Memory []Memory `json:"memory"`
}

// Meta says where and how the figures were taken.
type Meta struct {
	Smoke     bool    `json:"smoke"`
	Started   string  `json:"started"`
	Seconds   float64 `json:"seconds"`
	Commit    string  `json:"commit"`
	GoVersion string  `json:"go_version"`
	CPUs      int     `json:"cpus"`
	CPUModel  string  `json:"cpu_model"`
	MemoryGiB float64 `json:"memory_gib"`
	// LoadBefore and LoadAfter are the 1-minute load averages around the run.
	LoadBefore float64 `json:"load_before"`
	LoadAfter  float64 `json:"load_after"`
	Kubernetes string  `json:"kubernetes"`
	Kwok       string  `json:"kwok"`
}

// Memory is the peak RSS of each program at one cluster size.
type Memory struct {
	Nodes  int                `json:"nodes"`
	PeakMB map[string]float64 `json:"peak_mib"`
}

// Headline returns the figures the issue names, for every cluster size measured:
// sched_pods_per_sec_<N>_nodes (one share per pod, default model, HeadlineFill),
// sched_pods_per_sec_<N>_nodes_extended_resource (the same pods asking for the extended
// resource, same run) and their ratio.
func (r *Results) Headline() map[string]float64 {
	out := map[string]float64{}
	for _, p := range r.Points {
		if p.Fill != HeadlineFill {
			continue
		}
		key := "sched_pods_per_sec_" + strconv.Itoa(p.Nodes) + "_nodes"
		switch {
		case p.Scenario == ScenarioShare.Name && p.Model == ModelDefault:
			out[key] = p.PodsPerSec
		case p.Scenario == ScenarioExtendedResource.Name:
			out[key+"_extended_resource"] = p.PodsPerSec
		}
	}
	for k, v := range maps.Clone(out) {
		if base, ok := strings.CutSuffix(k, "_extended_resource"); ok && v > 0 {
			if dra, ok := out[base]; ok {
				out[strings.Replace(base, "sched_pods_per_sec_", "sched_ratio_vs_extended_resource_", 1)] = dra / v
			}
		}
	}
	return out
}

// MarshalJSON puts the headline figures at the top level beside the details.
func (r *Results) MarshalJSON() ([]byte, error) {
	type plain Results
	data, err := json.Marshal((*plain)(r))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	for k, v := range r.Headline() {
		m[k] = v
	}
	return json.Marshal(m)
}

// Write writes the results to path, indented.
func (r *Results) Write(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
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

package scale

import (
	"encoding/json"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/test/bench"
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
	// Runs are the runs whose results Merge joined, each with the sizes it measured;
	// empty for the results of one run.
	Runs []Meta `json:"runs,omitempty"`
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
	// Sizes are the cluster sizes the run measured; set by Merge.
	Sizes []int `json:"sizes,omitempty"`
}

// Memory is the peak RSS of each program at one cluster size.
type Memory struct {
	Nodes  int                `json:"nodes"`
	PeakMB map[string]float64 `json:"peak_mib"`
}

// Headline returns the figures the issue names, for every cluster size measured:
// sched_pods_per_sec_<N>_nodes (one share per pod, default model, HeadlineFill, the
// scheduler's default settings), sched_pods_per_sec_<N>_nodes_extended_resource (the
// same pods asking for the extended resource, same run) and their ratio
// sched_ratio_vs_extended_resource_<N>_nodes; the same with the scheduler tuned carry
// the suffix _percentage_<P>.
func (r *Results) Headline() map[string]float64 {
	type key struct{ nodes, percentage int }
	out := map[string]float64{}
	dra, er := map[key]float64{}, map[key]float64{}
	for _, p := range r.Points {
		k := key{p.Nodes, p.PercentageOfNodesToScore}
		switch {
		case p.Fill != HeadlineFill:
		case p.Scenario == ScenarioShare.Name && p.Model == ModelDefault:
			dra[k] = p.PodsPerSec
		case p.Scenario == ScenarioExtendedResource.Name:
			er[k] = p.PodsPerSec
		}
	}
	suffix := func(k key) string {
		if k.percentage == 0 {
			return ""
		}
		return "_percentage_" + strconv.Itoa(k.percentage)
	}
	for k, v := range dra {
		n := strconv.Itoa(k.nodes)
		out["sched_pods_per_sec_"+n+"_nodes"+suffix(k)] = v
		if e, ok := er[k]; ok && e > 0 {
			out["sched_ratio_vs_extended_resource_"+n+"_nodes"+suffix(k)] = v / e
		}
	}
	for k, v := range er {
		out["sched_pods_per_sec_"+strconv.Itoa(k.nodes)+"_nodes_extended_resource"+suffix(k)] = v
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
func (r *Results) Write(path string) error { return bench.WriteJSONFile(path, r) }

package bench

import "fmt"

// Every headline figure of Results is listed exactly once, in Goals or in Context: the
// report's two tables, rdma-dra-bench's summary and MissingKeys are made from these two
// lists and nothing else, and TestHeadlineKeys checks that each key is one Results
// writes.

// Goal is a headline figure with a goal in force: the report marks it met or missed.
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

// ContextFigure is a headline figure that is measured and shown but carries no goal,
// so it is never met or missed: it is bounded by something other than this driver's
// work, or it stands beside a figure that has the goal.
type ContextFigure struct {
	Key  string
	What string
	Unit string
	// Why says in one line why the figure is context and where the report explains it.
	Why   string
	Value *float64
}

// Goals lists the goals in force, in report order.
func (r *Results) Goals() []Goal {
	return []Goal{
		// Within the client's burst, one claim at a time, the round trip is the plugin's
		// own work: it is held to a tenth under the reference driver's.
		{Key: "prepare_p50_ratio_vs_reference_c1", What: "prepare p50 / dra-example-driver's, 1 concurrent, both at 50/100 QPS/burst",
			Unit: "×", Limit: 0.9, Value: r.PrepareP50RatioVsReferenceC1},
		// 0.98, not 1: past the burst both plugins are held to the same client limit, and
		// each prepare costs both one GET of the claim, so at best the two tie (a full run
		// measured 0.9997). The goal is not to fall behind the limiter, within the noise
		// of a tie.
		{Key: "cycles_ratio_vs_reference_default_limits", What: "cycles/s (status backlog included) / dra-example-driver's, 16 concurrent, 50/100",
			Unit: "×", Limit: 0.98, AtLeast: true, Value: r.CyclesRatioVsReferenceDefaultLimits},
		{Key: "status_updates_dropped", What: "claim status updates lost over the whole run", Value: r.StatusUpdatesDropped},
		{Key: "attach_detach_p99_ms", What: "p99 attach+detach of one pod's macvlan (2 addresses, 1 route, emulated GIDs), no checkpoint",
			Unit: "ms", Limit: 50, Value: r.AttachDetachP99MS},
		{Key: "discovery_ms_large", What: "one full discovery, 64 ports + 256 VFs", Unit: "ms", Limit: 50, Value: r.DiscoveryMSLarge},
		{Key: "event_to_slice_ms", What: "port state change to updated ResourceSlice (median)", Unit: "ms", Limit: 1500, Value: r.EventToSliceMS},
		{Key: "slice_bytes_per_node", What: "JSON size of an 8-port node's ResourceSlices", Unit: "bytes", Limit: 16384, Value: r.SliceBytesPerNode},
		{Key: "idle_rss_mib", What: "plugin RSS after idling, 8-port node", Unit: "MiB", Limit: 40, Value: r.IdleRSSMiB},
	}
}

// Context lists the headline figures without a goal, in report order. The first four
// were goals once and were retired as ill-posed: at the client's own rate limit they
// measure the API server and the limiter, and the allocation time is the scheduler's.
func (r *Results) Context() []ContextFigure {
	qps := fmt.Sprintf("the client's %d QPS", defaultQPS)
	return []ContextFigure{
		{Key: "prepare_p99_ms", What: "p99 NodePrepareResources, 1-device claims, 16 concurrent", Unit: "ms", Value: r.PrepareP99MS,
			Why: "the wait for " + qps + " and the API server's round trip, not the plugin's work: see Prepare"},
		{Key: "prepare_p99_ms_8dev", What: "p99 NodePrepareResources, 8-device claims, 16 concurrent", Unit: "ms", Value: r.PrepareP99MS8Dev,
			Why: "the wait for " + qps + " and the API server's round trip, not the plugin's work: see Prepare"},
		{Key: "prepare_per_sec", What: "claims prepared and unprepared per second, 64 concurrent", Unit: "1/s", Value: r.PreparePerSec,
			Why: "capped at " + qps + " by the one GET each prepare costs: see Prepare"},
		{Key: "alloc_ms_per_pod_1000_nodes", What: "allocation time per pod, 1000 nodes × 8 ports, 80% full", Unit: "ms", Value: r.AllocMSPerPod1000Nodes,
			Why: "the scheduler's allocator, not the plugin; scheduler_perf compares the driver's slices with the reference driver's: see Scheduler allocation"},
		{Key: "attach_detach_p50_ms", What: "p50 attach+detach of one pod's macvlan", Unit: "ms", Value: r.AttachDetachP50MS,
			Why: "the median beside `attach_detach_p99_ms`, which carries the goal"},
	}
}

// MissingKeys lists the headline keys without a value: those of the goals, then those
// of the context figures.
func (r *Results) MissingKeys() []string {
	var out []string
	for _, g := range r.Goals() {
		if g.Value == nil {
			out = append(out, g.Key)
		}
	}
	for _, c := range r.Context() {
		if c.Value == nil {
			out = append(out, c.Key)
		}
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

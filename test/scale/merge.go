package scale

import (
	"cmp"
	"fmt"
	"slices"
)

// Merge joins the results of runs that measured different cluster sizes into one,
// for a report of sizes that do not fit in one run of the machine's time or memory.
// Each run's Meta is kept in Runs, with the sizes it measured; Meta is the first
// run's. Two runs that measured the same size, a smoke run beside a full one, or runs
// of different Kubernetes versions are an error.
func Merge(runs ...*Results) (*Results, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("merge: no results")
	}
	out := &Results{Meta: runs[0].Meta}
	measuredBy := map[int]int{}
	for i, r := range runs {
		if r.Meta.Smoke != runs[0].Meta.Smoke {
			return nil, fmt.Errorf("merge: run %d (started %s) is a smoke run and run 1 is not, or the other way round", i+1, r.Meta.Started)
		}
		if r.Meta.Kubernetes != runs[0].Meta.Kubernetes {
			return nil, fmt.Errorf("merge: run %d measured Kubernetes %s, run 1 %s", i+1, r.Meta.Kubernetes, runs[0].Meta.Kubernetes)
		}
		meta := r.Meta
		meta.Sizes = sizes(r)
		for _, n := range meta.Sizes {
			if j, ok := measuredBy[n]; ok {
				return nil, fmt.Errorf("merge: runs %d and %d both measured %d nodes", j+1, i+1, n)
			}
			measuredBy[n] = i
		}
		// A run before Runs existed is one run; a merged one brings its runs along.
		if len(r.Runs) > 0 {
			out.Runs = append(out.Runs, r.Runs...)
		} else {
			out.Runs = append(out.Runs, meta)
		}
		for _, s := range r.Scenarios {
			if !slices.ContainsFunc(out.Scenarios, func(o Scenario) bool { return o.Name == s.Name }) {
				out.Scenarios = append(out.Scenarios, s)
			}
		}
		out.Points = append(out.Points, r.Points...)
		out.Slices = append(out.Slices, r.Slices...)
		out.API = append(out.API, r.API...)
		out.Memory = append(out.Memory, r.Memory...)
	}
	// Each run's figures are in the order it measured them; runs go by cluster size.
	slices.SortStableFunc(out.Points, func(a, b Point) int { return cmp.Compare(a.Nodes, b.Nodes) })
	slices.SortStableFunc(out.API, func(a, b APIFigures) int { return cmp.Compare(a.Nodes, b.Nodes) })
	slices.SortStableFunc(out.Memory, func(a, b Memory) int { return cmp.Compare(a.Nodes, b.Nodes) })
	return out, nil
}

package bench

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/rdma-dra/rdma-dra-driver/test/internal/plotsvg"
)

// Figures written next to the report, as SVG.
const (
	figThroughput = "benchmarks-throughput.svg"
	figDiscovery  = "benchmarks-discovery.svg"
	figAlloc      = "benchmarks-alloc.svg"
	figModels     = "benchmarks-models.svg"
)

// writeFigures draws the figures that have data into dir.
func writeFigures(r *Results, dir string) error {
	for name, draw := range map[string]func(*Details) (*plot.Plot, error){
		figThroughput: throughputFigure,
		figDiscovery:  discoveryFigure,
		figAlloc:      allocFigure,
		figModels:     modelsFigure,
	} {
		pl, err := draw(&r.Details)
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		if pl == nil {
			continue
		}
		if err := plotsvg.Save(pl, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// throughputFigure is prepare+unprepare cycles per second against concurrency; nil
// without throughput loads. It draws no goal: prepare_per_sec is a context figure.
func throughputFigure(d *Details) (*plot.Plot, error) {
	if len(d.Throughput) == 0 {
		return nil, nil
	}
	var rate plotter.XYs
	for _, t := range d.Throughput {
		rate = append(rate, plotter.XY{X: float64(t.Concurrency), Y: t.PerSec})
	}
	pl := plot.New()
	pl.Title.Text = "Prepare+unprepare cycles per second, one-device claims"
	pl.X.Label.Text = "concurrent claims"
	pl.Y.Label.Text = "cycles/s"
	pl.Y.Min = 0
	plotsvg.LogAxis(&pl.X)
	if err := plotsvg.Line(pl, 0, "cycles/s", rate); err != nil {
		return nil, err
	}
	// Room above the highest rate: at the client's limit the line is flat, and it would
	// otherwise run along the frame.
	pl.Y.Max *= 1.25
	return pl, nil
}

// discoveryFigure is the median time of one full discovery against the ports of the
// node, with the goal of discovery_ms_large; nil without discovery points.
func discoveryFigure(d *Details) (*plot.Plot, error) {
	if len(d.Discovery) == 0 {
		return nil, nil
	}
	var scan plotter.XYs
	for _, p := range d.Discovery {
		scan = append(scan, plotter.XY{X: float64(p.Ports), Y: p.Scan.P50})
	}
	if scan = plotsvg.Positive(scan); len(scan) == 0 {
		return nil, nil
	}
	pl := plot.New()
	pl.Title.Text = "One full discovery (median)"
	pl.X.Label.Text = "ports per node"
	pl.Y.Label.Text = "ms"
	plotsvg.LogAxis(&pl.X)
	plotsvg.LogAxis(&pl.Y)
	if err := plotsvg.Line(pl, 0, "scan", scan); err != nil {
		return nil, err
	}
	goal, err := goalLimit("discovery_ms_large")
	if err != nil {
		return nil, err
	}
	plotsvg.Goal(pl, goal)
	return pl, nil
}

// allocFigure is the allocation time per pod against the number of nodes, in all and
// in the Allocate calls alone; nil without allocation points. It draws no goal:
// alloc_ms_per_pod_1000_nodes is a context figure.
func allocFigure(d *Details) (*plot.Plot, error) {
	if len(d.AllocNodes) == 0 {
		return nil, nil
	}
	var total, calls plotter.XYs
	for _, p := range d.AllocNodes {
		total = append(total, plotter.XY{X: float64(p.Nodes), Y: p.PerPod.Mean})
		calls = append(calls, plotter.XY{X: float64(p.Nodes), Y: p.FilterMS})
	}
	if total, calls = plotsvg.Positive(total), plotsvg.Positive(calls); len(total) == 0 {
		return nil, nil
	}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("DRA allocation per pod, cluster %.0f%% full", Fill*100)
	pl.X.Label.Text = "nodes (8 ports each)"
	pl.Y.Label.Text = "ms"
	plotsvg.LogAxis(&pl.X)
	plotsvg.LogAxis(&pl.Y)
	if err := plotsvg.Line(pl, 0, "per pod", total); err != nil {
		return nil, err
	}
	if len(calls) > 0 {
		if err := plotsvg.Line(pl, 1, "Allocate calls only", calls); err != nil {
			return nil, err
		}
	}
	// The lines rise to the right: the top left is free.
	pl.Legend.Top, pl.Legend.Left = true, true
	return pl, nil
}

// modelsFigure is the allocation time per pod of each device model, a bar each in the
// report's order; nil without them.
func modelsFigure(d *Details) (*plot.Plot, error) {
	if len(d.AllocModels) == 0 {
		return nil, nil
	}
	var labels []string
	var values []float64
	for _, p := range d.AllocModels {
		labels = append(labels, p.Variant.Name)
		values = append(values, p.PerPod.Mean)
	}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Allocation per pod by model, %d nodes", d.AllocModels[0].Nodes)
	pl.X.Label.Text = "ms per pod"
	if err := plotsvg.HorizontalBars(pl, labels, values); err != nil {
		return nil, err
	}
	return pl, nil
}

// goalLimit is the limit of a goal in force, as Goals lists it; an error for a context
// figure, which has none.
func goalLimit(key string) (float64, error) {
	for _, g := range (&Results{}).Goals() {
		if g.Key == key {
			return g.Limit, nil
		}
	}
	return 0, fmt.Errorf("find goal: %s is no goal in force", key)
}

package scale

import (
	"fmt"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/rdma-dra/rdma-dra-driver/test/internal/plotsvg"
)

// The plots WritePlots draws, beside the report.
const (
	ThroughputPlot = "benchmarks-scale-throughput.svg"
	RatioPlot      = "benchmarks-scale-ratio.svg"
)

// WritePlots draws the report's figures as SVG into dir: the throughput of every
// scenario at the largest cluster size and HeadlineFill with the scheduler's default
// settings (ThroughputPlot), and the one-share/extended-resource ratio against the
// cluster size for each scheduler setting, with the goal (RatioPlot).
func WritePlots(r *Results, dir string) error {
	ns := sizes(r)
	if len(ns) == 0 {
		return fmt.Errorf("no points to plot")
	}
	for name, p := range map[string]func(*Results, int) (*plot.Plot, error){
		ThroughputPlot: throughputPlot,
		RatioPlot:      ratioPlot,
	} {
		pl, err := p(r, ns[len(ns)-1])
		if err != nil {
			return fmt.Errorf("plot %s: %w", name, err)
		}
		if err := plotsvg.Save(pl, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// throughputPlot is a horizontal bar per scenario and model at nodes, HeadlineFill and
// the default scheduler, in the report's order; the extended resource is the last bar.
func throughputPlot(r *Results, nodes int) (*plot.Plot, error) {
	var values []float64
	var labels []string
	var er *Point
	for i, p := range r.Points {
		if p.Nodes != nodes || p.Fill != HeadlineFill || p.PercentageOfNodesToScore != 0 {
			continue
		}
		if p.Scenario == ScenarioExtendedResource.Name {
			er = &r.Points[i]
			continue
		}
		values = append(values, p.PodsPerSec)
		labels = append(labels, fmt.Sprintf("%s (%s)", p.Scenario, p.Model))
	}
	if er != nil {
		values = append(values, er.PodsPerSec)
		labels = append(labels, "extended resource (device plugin)")
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("no point at %d nodes and fill %.0f%%", nodes, HeadlineFill*100)
	}
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Pods bound per second, %d nodes, %.0f%% of the ports taken", nodes, HeadlineFill*100)
	pl.X.Label.Text = "pods/s (burst)"
	if err := plotsvg.HorizontalBars(pl, labels, values); err != nil {
		return nil, err
	}
	return pl, nil
}

// ratioPlot is the one-share/extended-resource ratio against the cluster size, a line per
// scheduler setting, and the goal.
func ratioPlot(r *Results, _ int) (*plot.Plot, error) {
	h := r.Headline()
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("One share (default model) / extended resource, %.0f%% of the ports taken", HeadlineFill*100)
	pl.X.Label.Text = "nodes"
	pl.Y.Label.Text = "throughput ratio"
	pl.Y.Min, pl.Y.Max = 0, 1
	ns := sizes(r)
	if len(ns) > 1 {
		plotsvg.LogAxis(&pl.X)
	}
	for i, pct := range percentages(r) {
		suffix := ""
		if pct != 0 {
			suffix = fmt.Sprintf("_percentage_%d", pct)
		}
		var xys plotter.XYs
		for _, n := range ns {
			if v, ok := h[fmt.Sprintf("sched_ratio_vs_extended_resource_%d_nodes%s", n, suffix)]; ok {
				xys = append(xys, plotter.XY{X: float64(n), Y: v})
			}
		}
		if len(xys) == 0 {
			continue
		}
		if err := plotsvg.Line(pl, i, "scheduler: "+schedulerSetting(pct), xys); err != nil {
			return nil, err
		}
	}
	plotsvg.Goal(pl, 0.5)
	pl.Legend.Top = true
	return pl, nil
}

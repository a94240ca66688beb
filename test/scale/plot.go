package scale

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
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
		if err := savePlot(pl, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}

// savePlot writes pl as an SVG file.
func savePlot(pl *plot.Plot, path string) error {
	w, err := pl.WriterTo(7*vg.Inch, 4*vg.Inch, "svg")
	if err != nil {
		return fmt.Errorf("render %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write plot: %w", err)
	}
	if _, err := w.WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// throughputPlot is a horizontal bar per scenario and model at nodes, HeadlineFill and
// the default scheduler, in the report's order; the extended resource is the last bar.
func throughputPlot(r *Results, nodes int) (*plot.Plot, error) {
	var values plotter.Values
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
	// Bars are drawn bottom-up; the first scenario goes on top.
	slices.Reverse(values)
	slices.Reverse(labels)
	pl := plot.New()
	pl.Title.Text = fmt.Sprintf("Pods bound per second, %d nodes, %.0f%% of the ports taken", nodes, HeadlineFill*100)
	pl.X.Label.Text = "pods/s (burst)"
	pl.X.Min = 0
	bars, err := plotter.NewBarChart(values, vg.Points(14))
	if err != nil {
		return nil, err
	}
	bars.Horizontal = true
	bars.Color = color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}
	bars.LineStyle.Width = 0
	pl.Add(bars)
	pl.NominalY(labels...)
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
		pl.X.Scale = plot.LogScale{}
		pl.X.Tick.Marker = plot.LogTicks{Prec: -1}
	}
	palette := []color.Color{color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff}, color.RGBA{R: 0xd9, G: 0x5f, B: 0x02, A: 0xff}, color.RGBA{R: 0x1b, G: 0x9e, B: 0x77, A: 0xff}}
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
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, err
		}
		c := palette[i%len(palette)]
		line.Color, points.Color = c, c
		pl.Add(line, points)
		pl.Legend.Add("scheduler: "+schedulerSetting(pct), line, points)
	}
	goal := plotter.NewFunction(func(float64) float64 { return 0.5 })
	goal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	goal.Color = color.Gray{Y: 0x70}
	pl.Add(goal)
	pl.Legend.Add("goal (0.5)", goal)
	pl.Legend.Top = true
	return pl, nil
}

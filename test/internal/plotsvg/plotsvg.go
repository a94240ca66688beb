// Package plotsvg draws the figures of the benchmark reports (test/bench's
// docs/benchmarks.md, test/scale's docs/benchmarks-scale.md) with gonum.org/v1/plot and
// writes them as SVG, which browsers and Markdown viewers show beside the reports. It
// holds what the figures share, so that they look alike: the size, the colours, bars,
// lines, log axes and the dashed goal line.
package plotsvg

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Width and Height are the size of every figure.
const (
	Width  = 7 * vg.Inch
	Height = 4 * vg.Inch
)

// palette colours the series of a figure in order; Color cycles through it.
var palette = []color.Color{
	color.RGBA{R: 0x2b, G: 0x6c, B: 0xb0, A: 0xff},
	color.RGBA{R: 0xd9, G: 0x5f, B: 0x02, A: 0xff},
	color.RGBA{R: 0x1b, G: 0x9e, B: 0x77, A: 0xff},
}

// goalColor is the colour of the goal line, apart from the series.
var goalColor = color.Gray{Y: 0x70}

// Color is the colour of the i-th series of a figure.
func Color(i int) color.Color { return palette[i%len(palette)] }

// Save writes pl as an SVG file at path. The same plot gives the same bytes: fonts are
// referred to by name, not embedded.
func Save(pl *plot.Plot, path string) error {
	w, err := pl.WriterTo(Width, Height, "svg")
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

// HorizontalBars adds one horizontal bar per value, named by the label of the same index
// on the y axis, the first on top, and starts the x axis at zero.
func HorizontalBars(pl *plot.Plot, labels []string, values []float64) error {
	if len(labels) != len(values) {
		return fmt.Errorf("add bars: %d labels for %d values", len(labels), len(values))
	}
	// Bars are drawn bottom-up.
	vs := slices.Clone(plotter.Values(values))
	ls := slices.Clone(labels)
	slices.Reverse(vs)
	slices.Reverse(ls)
	bars, err := plotter.NewBarChart(vs, vg.Points(14))
	if err != nil {
		return fmt.Errorf("add bars: %w", err)
	}
	bars.Horizontal = true
	bars.Color = Color(0)
	bars.LineStyle.Width = 0
	pl.X.Min = 0
	pl.Add(bars)
	pl.NominalY(ls...)
	return nil
}

// Line adds the i-th series of a figure: a line through xys with a mark on each point,
// in the series' colour, named in the legend.
func Line(pl *plot.Plot, i int, name string, xys plotter.XYs) error {
	line, points, err := plotter.NewLinePoints(xys)
	if err != nil {
		return fmt.Errorf("add line %s: %w", name, err)
	}
	c := Color(i)
	line.Color, points.Color = c, c
	pl.Add(line, points)
	pl.Legend.Add(name, line, points)
	return nil
}

// Goal adds a dashed horizontal line at y, named "goal (y)" in the legend, and widens
// the y axis to show it.
func Goal(pl *plot.Plot, y float64) {
	goal := plotter.NewFunction(func(float64) float64 { return y })
	goal.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	goal.Color = goalColor
	pl.Add(goal)
	pl.Legend.Add(fmt.Sprintf("goal (%g)", y), goal)
	pl.Y.Min, pl.Y.Max = min(pl.Y.Min, y), max(pl.Y.Max, y)
}

// LogAxis puts a on a log10 scale with a labelled tick at each power of ten. Every value
// on it must be positive.
func LogAxis(a *plot.Axis) {
	a.Scale = plot.LogScale{}
	a.Tick.Marker = logTicks{}
}

// logTicks are plot.LogTicks, a labelled tick at each power of ten and unlabelled ones
// between them, with the ticks at 2 and 5 times a power of ten labelled too when fewer
// than two powers of ten fall on the axis: one label is not enough to read a value.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	powers := 0
	for _, t := range ticks {
		if t.Label != "" && t.Value >= lo && t.Value <= hi {
			powers++
		}
	}
	if powers >= 2 {
		return ticks
	}
	for i, t := range ticks {
		if m := math.Round(t.Value / math.Pow10(int(math.Floor(math.Log10(t.Value))))); m == 2 || m == 5 {
			ticks[i].Label = strconv.FormatFloat(t.Value, 'g', -1, 64)
		}
	}
	return ticks
}

// Positive is xys without the points a log axis cannot show: zero, negative, NaN or
// infinite coordinates (a step that measured nothing). Such a point would make the plot
// panic when it is drawn.
func Positive(xys plotter.XYs) plotter.XYs {
	var out plotter.XYs
	for _, p := range xys {
		if p.X > 0 && p.Y > 0 && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0) {
			out = append(out, p)
		}
	}
	return out
}

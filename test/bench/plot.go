package bench

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
)

// Point is one (x, y) of a series.
type Point struct{ X, Y float64 }

// Series is one line of a chart.
type Series struct {
	Name   string
	Points []Point
}

// Chart is a line chart; Bars turns it into a bar chart of the first series, one bar
// per point, labelled with Labels.
type Chart struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	// Goal draws a dashed horizontal line at this y when not nil.
	Goal *float64
	// Bars draws bars instead of lines; Labels name them.
	Bars   bool
	Labels []string
}

// Figure size and layout in pixels.
const (
	figW, figH               = 800, 480
	padL, padR, padT, padB   = 90, 30, 50, 70
	textScale, titleScale    = 2, 2
	markerSize, lineWidth    = 7, 2
	legendLineLen, legendGap = 24, 20
)

var (
	white   = color.RGBA{255, 255, 255, 255}
	black   = color.RGBA{30, 30, 30, 255}
	grey    = color.RGBA{215, 215, 215, 255}
	goalRed = color.RGBA{200, 40, 40, 255}
	palette = []color.RGBA{{31, 119, 180, 255}, {255, 127, 14, 255}, {44, 160, 44, 255}, {148, 103, 189, 255}, {140, 86, 75, 255}}
)

// axis maps data values to pixels, linearly or in log10.
type axis struct {
	lo, hi   float64
	log      bool
	pxLo, px float64
}

func newAxis(lo, hi float64, log bool, pxLo, pxHi float64) axis {
	if log {
		lo, hi = math.Log10(math.Max(lo, 1e-9)), math.Log10(math.Max(hi, 1e-9))
	}
	if hi-lo < 1e-9 {
		hi = lo + 1
	}
	return axis{lo: lo, hi: hi, log: log, pxLo: pxLo, px: pxHi - pxLo}
}

func (a axis) pos(v float64) float64 {
	if a.log {
		v = math.Log10(v)
	}
	return a.pxLo + (v-a.lo)/(a.hi-a.lo)*a.px
}

// ticks returns tick values: powers of ten (and 2×, 5×) on a log axis, about five
// round steps on a linear one.
func (a axis) ticks() []float64 {
	var out []float64
	if a.log {
		for e := math.Floor(a.lo); e <= math.Ceil(a.hi) && len(out) < 30; e++ {
			for _, m := range []float64{1, 2, 5} {
				v := m * math.Pow(10, e)
				if lv := math.Log10(v); lv >= a.lo-1e-9 && lv <= a.hi+1e-9 {
					out = append(out, v)
				}
			}
		}
		return out
	}
	step := niceStep((a.hi - a.lo) / 5)
	for v := math.Ceil(a.lo/step) * step; v <= a.hi+1e-9 && len(out) < 20; v += step {
		out = append(out, v)
	}
	return out
}

func niceStep(raw float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= raw {
			return m * p
		}
	}
	return 10 * p
}

// formatTick prints a tick value briefly: 1500 as 1.5K, 0.25 as 0.25.
func formatTick(v float64) string {
	switch av := math.Abs(v); {
	case av >= 1e6:
		return trimZeros(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case av >= 1e3:
		return trimZeros(fmt.Sprintf("%.1f", v/1e3)) + "K"
	case av >= 1 || av == 0:
		return trimZeros(fmt.Sprintf("%.1f", v))
	default:
		return trimZeros(fmt.Sprintf("%.3f", v))
	}
}

func trimZeros(s string) string {
	for len(s) > 1 && s[len(s)-1] == '0' && containsDot(s) {
		s = s[:len(s)-1]
	}
	if s[len(s)-1] == '.' {
		s = s[:len(s)-1]
	}
	return s
}

func containsDot(s string) bool {
	for _, r := range s {
		if r == '.' {
			return true
		}
	}
	return false
}

// drawable drops the points a log axis cannot show (zero or negative).
func (c Chart) drawable(pts []Point) []Point {
	var out []Point
	for _, p := range pts {
		if (c.LogX && !c.Bars && p.X <= 0) || (c.LogY && p.Y <= 0) || math.IsNaN(p.X) || math.IsNaN(p.Y) || math.IsInf(p.Y, 0) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// bounds returns the data range of the chart, including zero on linear y axes and
// the goal.
func (c Chart) bounds() (xlo, xhi, ylo, yhi float64) {
	xlo, ylo = math.Inf(1), math.Inf(1)
	xhi, yhi = math.Inf(-1), math.Inf(-1)
	for _, s := range c.Series {
		for _, p := range c.drawable(s.Points) {
			xlo, xhi = math.Min(xlo, p.X), math.Max(xhi, p.X)
			ylo, yhi = math.Min(ylo, p.Y), math.Max(yhi, p.Y)
		}
	}
	if c.Goal != nil {
		ylo, yhi = math.Min(ylo, *c.Goal), math.Max(yhi, *c.Goal)
	}
	if math.IsInf(xlo, 0) {
		return 0, 1, 0, 1
	}
	if !c.LogY {
		ylo = math.Min(ylo, 0)
		yhi *= 1.1
	} else {
		ylo, yhi = ylo/1.5, yhi*1.5
	}
	if c.Bars {
		xlo, xhi = -0.5, float64(len(c.Series[0].Points))-0.5
	}
	return xlo, xhi, ylo, yhi
}

// Render draws the chart.
func (c Chart) Render() *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, figW, figH))
	fillRect(img, 0, 0, figW, figH, white)
	xlo, xhi, ylo, yhi := c.bounds()
	plotL, plotR, plotT, plotB := padL, figW-padR, padT, figH-padB
	xa := newAxis(xlo, xhi, c.LogX && !c.Bars, float64(plotL), float64(plotR))
	ya := newAxis(ylo, yhi, c.LogY, float64(plotB), float64(plotT))
	for _, t := range ya.ticks() {
		y := int(ya.pos(t))
		fillRect(img, plotL, y, plotR-plotL, 1, grey)
		label := formatTick(t)
		drawText(img, plotL-8-textWidth(label, textScale), y-glyphH*textScale/2, label, textScale, black)
	}
	if c.Bars {
		for i, l := range c.Labels {
			x := int(xa.pos(float64(i)))
			drawText(img, x-textWidth(l, 1)/2, plotB+8, l, 1, black)
		}
	} else {
		for _, t := range xa.ticks() {
			x := int(xa.pos(t))
			fillRect(img, x, plotT, 1, plotB-plotT, grey)
			label := formatTick(t)
			drawText(img, x-textWidth(label, textScale)/2, plotB+8, label, textScale, black)
		}
	}
	fillRect(img, plotL, plotT, 1, plotB-plotT, black)
	fillRect(img, plotL, plotB, plotR-plotL, 1, black)
	drawText(img, (figW-textWidth(c.Title, titleScale))/2, 12, c.Title, titleScale, black)
	drawText(img, (plotL+plotR-textWidth(c.XLabel, textScale))/2, figH-24, c.XLabel, textScale, black)
	drawText(img, 8, plotT-24, c.YLabel, textScale, black)
	if c.Goal != nil {
		y := int(ya.pos(*c.Goal))
		for x := plotL; x < plotR; x += 12 {
			fillRect(img, x, y-1, 6, 2, goalRed)
		}
		drawText(img, plotR-textWidth("GOAL", textScale), y-8-glyphH*textScale, "goal", textScale, goalRed)
	}
	for i, s := range c.Series {
		col := palette[i%len(palette)]
		if c.Bars {
			w := int(xa.px / float64(len(s.Points)) * 0.6)
			for j, p := range s.Points {
				x, y := int(xa.pos(float64(j))), int(ya.pos(p.Y))
				fillRect(img, x-w/2, y, w, plotB-y, palette[j%len(palette)])
				label := formatTick(p.Y)
				drawText(img, x-textWidth(label, textScale)/2, y-4-glyphH*textScale, label, textScale, black)
			}
			continue
		}
		pts := c.drawable(s.Points)
		for j, p := range pts {
			x, y := xa.pos(p.X), ya.pos(p.Y)
			fillRect(img, int(x)-markerSize/2, int(y)-markerSize/2, markerSize, markerSize, col)
			if j > 0 {
				drawLine(img, xa.pos(pts[j-1].X), ya.pos(pts[j-1].Y), x, y, col)
			}
		}
		if len(c.Series) > 1 {
			ly := plotT + 8 + i*legendGap
			fillRect(img, plotL+12, ly+glyphH*textScale/2-1, legendLineLen, lineWidth+1, col)
			drawText(img, plotL+12+legendLineLen+8, ly, s.Name, textScale, black)
		}
	}
	return img
}

// drawLine draws a thick line by stepping along it.
func drawLine(img *image.RGBA, x0, y0, x1, y1 float64, c color.Color) {
	n := int(math.Max(math.Abs(x1-x0), math.Abs(y1-y0))) + 1
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		fillRect(img, int(x0+t*(x1-x0))-lineWidth/2, int(y0+t*(y1-y0))-lineWidth/2, lineWidth, lineWidth, c)
	}
}

// WritePNG renders the chart into path.
func (c Chart) WritePNG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create figure: %w", err)
	}
	if err := png.Encode(f, c.Render()); err != nil {
		_ = f.Close()
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return f.Close()
}

package plotsvg

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

func TestSave(t *testing.T) {
	for _, tt := range []struct {
		name string
		draw func(*plot.Plot) error
		want []string
	}{
		{"bars", func(pl *plot.Plot) error {
			return HorizontalBars(pl, []string{"first bar", "second bar"}, []float64{3, 5})
		}, []string{"first bar", "second bar"}},
		{"lines and goal", func(pl *plot.Plot) error {
			LogAxis(&pl.X)
			if err := Line(pl, 0, "series one", plotter.XYs{{X: 1, Y: 2}, {X: 100, Y: 3}}); err != nil {
				return err
			}
			if err := Line(pl, 1, "series two", plotter.XYs{{X: 1, Y: 1}, {X: 100, Y: 4}}); err != nil {
				return err
			}
			Goal(pl, 7.5)
			return nil
		}, []string{"series one", "series two", "goal (7.5)", ">100<"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out [2][]byte
			for i := range out {
				pl := plot.New()
				pl.Title.Text = "a title"
				if err := tt.draw(pl); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(t.TempDir(), "figure.svg")
				if err := Save(pl, path); err != nil {
					t.Fatal(err)
				}
				data, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				out[i] = data
			}
			svg := string(out[0])
			if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, "<svg") {
				t.Fatalf("not an SVG document: %.80q", svg)
			}
			for _, w := range append(tt.want, "a title") {
				if !strings.Contains(svg, w) {
					t.Errorf("the figure does not show %q", w)
				}
			}
			if !bytes.Equal(out[0], out[1]) {
				t.Error("the same plot gave two different files")
			}
		})
	}
}

func TestGoalWidensAxis(t *testing.T) {
	for _, tt := range []struct {
		name             string
		goal             float64
		wantMin, wantMax float64
	}{
		{"above the data", 300, 40, 300},
		{"below the data", 5, 5, 60},
		{"within the data", 50, 40, 60},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pl := plot.New()
			if err := Line(pl, 0, "data", plotter.XYs{{X: 1, Y: 40}, {X: 2, Y: 60}}); err != nil {
				t.Fatal(err)
			}
			Goal(pl, tt.goal)
			if pl.Y.Min != tt.wantMin || pl.Y.Max != tt.wantMax {
				t.Errorf("y axis %g..%g, want %g..%g", pl.Y.Min, pl.Y.Max, tt.wantMin, tt.wantMax)
			}
		})
	}
}

func TestHorizontalBarsMismatch(t *testing.T) {
	if err := HorizontalBars(plot.New(), []string{"one"}, []float64{1, 2}); err == nil {
		t.Error("no error for two values and one label")
	}
}

func TestPositive(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   plotter.XYs
		want int
	}{
		{"all drawable", plotter.XYs{{X: 1, Y: 1}, {X: 2, Y: 0.5}}, 2},
		{"zero y", plotter.XYs{{X: 1, Y: 0}, {X: 2, Y: 3}}, 1},
		{"zero x", plotter.XYs{{X: 0, Y: 1}}, 0},
		{"negative, NaN, infinite", plotter.XYs{{X: 1, Y: -1}, {X: math.NaN(), Y: 1}, {X: 1, Y: math.Inf(1)}}, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := Positive(tt.in); len(got) != tt.want {
				t.Errorf("Positive kept %v, want %d points", got, tt.want)
			}
		})
	}
}

func TestLogTicks(t *testing.T) {
	for _, tt := range []struct {
		name   string
		lo, hi float64
		want   []string
	}{
		{"two decades", 100, 1000, []string{"100", "1000"}},
		{"one power of ten", 1.4, 65, []string{"2", "5", "10", "20", "50"}},
		{"no power of ten", 2.5, 8, []string{"5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, tick := range (logTicks{}).Ticks(tt.lo, tt.hi) {
				if tick.Label != "" && tick.Value >= tt.lo && tick.Value <= tt.hi {
					got = append(got, tick.Label)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("labels %v, want %v", got, tt.want)
			}
		})
	}
}

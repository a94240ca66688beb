package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWriteFigures draws the figures of sampleResults twice and checks that each is an
// SVG document naming its series and the goal in force it shows, if any, the same both
// times.
func TestWriteFigures(t *testing.T) {
	r := sampleResults()
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		if err := writeFigures(r, dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		fig  string
		want []string
		// notWant: the throughput and allocation figures are of context figures,
		// which have no goal to draw.
		notWant []string
	}{
		{figThroughput, []string{"cycles/s", "concurrent claims"}, []string{"goal ("}},
		{figDiscovery, []string{"scan", "goal (50)", "ports per node"}, nil},
		{figAlloc, []string{"per pod", "Allocate calls only", "80% full"}, []string{"goal ("}},
		{figModels, []string{"1000 nodes", "partitionable, 8 shares", "legacy, 64 share devices"}, nil},
	} {
		t.Run(tt.fig, func(t *testing.T) {
			first, err := os.ReadFile(filepath.Join(dirs[0], tt.fig))
			if err != nil {
				t.Fatal(err)
			}
			svg := string(first)
			if !strings.HasPrefix(svg, "<?xml") || !strings.Contains(svg, "<svg") {
				t.Fatalf("not an SVG document: %.80q", svg)
			}
			for _, w := range tt.want {
				if !strings.Contains(svg, w) {
					t.Errorf("does not show %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(svg, w) {
					t.Errorf("shows %q", w)
				}
			}
			second, err := os.ReadFile(filepath.Join(dirs[1], tt.fig))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(first, second) {
				t.Error("the same results gave two different figures")
			}
		})
	}
}

// TestWriteFiguresWithoutData checks that a run that measured nothing draws no figure
// rather than failing.
func TestWriteFiguresWithoutData(t *testing.T) {
	dir := t.TempDir()
	if err := writeFigures(&Results{}, dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("figure %s drawn without data", e.Name())
	}
}

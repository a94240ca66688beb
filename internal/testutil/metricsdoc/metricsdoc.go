// Package metricsdoc checks, in tests, the Markdown tables that document metrics
// against what a registry serves, so that the docs and the code stay one list: each
// row's name, type, stability level and label names must be those of a served metric.
package metricsdoc

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// Metric is what a documentation row says about one metric, and what a registry serves.
type Metric struct {
	Name string
	// Type is counter, gauge or histogram, lower case as in the text format.
	Type string
	// Stability is component-base's level: ALPHA, BETA, STABLE or INTERNAL.
	Stability string
	// Labels are the label names, sorted.
	Labels []string
}

// String renders m as a documentation row would state it.
func (m Metric) String() string {
	return fmt.Sprintf("%s %s %s %v", m.Name, m.Type, m.Stability, m.Labels)
}

// stabilityHelp is the annotation component-base puts in front of a metric's help.
var stabilityHelp = regexp.MustCompile(`^\[(ALPHA|BETA|STABLE|INTERNAL)\] `)

// Served returns the metrics called names as g serves them. A vector shows its label
// names only through a series, so every one of them must have one: a name that g does
// not serve is an error.
func Served(g metrics.Gatherer, names []string) ([]Metric, error) {
	families, err := g.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	var out []Metric
	for _, name := range names {
		i := slices.IndexFunc(families, func(f *testutil.MetricFamily) bool { return f.GetName() == name })
		if i < 0 || len(families[i].GetMetric()) == 0 {
			return nil, fmt.Errorf("metric %s has no series: give it one before calling Served", name)
		}
		f := families[i]
		level := stabilityHelp.FindStringSubmatch(f.GetHelp())
		if level == nil {
			return nil, fmt.Errorf("metric %s has no stability level in its help %q", name, f.GetHelp())
		}
		m := Metric{Name: name, Type: strings.ToLower(f.GetType().String()), Stability: level[1]}
		for _, l := range f.GetMetric()[0].GetLabel() {
			m.Labels = append(m.Labels, l.GetName())
		}
		slices.Sort(m.Labels)
		out = append(out, m)
	}
	return out, nil
}

// backticked is a word in backticks, as names and labels are written in the tables.
var backticked = regexp.MustCompile("`([^`]+)`")

// Documented returns the metrics of path's table rows that start with a metric name
// with prefix in backticks; such rows have the columns metric, type, stability,
// labels (each label name in backticks, values in parentheses after it) and meaning.
func Documented(path, prefix string) ([]Metric, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read metric docs: %w", err)
	}
	var out []Metric
	for n, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `"+prefix) {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) != 7 { // empty, the five columns, empty
			return nil, fmt.Errorf("%s:%d: %d columns, want metric, type, stability, labels, meaning", path, n+1, len(cells)-2)
		}
		m := Metric{
			Name:      strings.Trim(strings.TrimSpace(cells[1]), "`"),
			Type:      strings.TrimSpace(cells[2]),
			Stability: strings.TrimSpace(cells[3]),
		}
		for _, l := range backticked.FindAllStringSubmatch(cells[4], -1) {
			m.Labels = append(m.Labels, l[1])
		}
		slices.Sort(m.Labels)
		out = append(out, m)
	}
	return out, nil
}

// Check compares the documented metrics with the served ones: every documented metric
// must be served as documented, and with all, every served one must be documented.
func Check(documented, served []Metric, all bool) []error {
	var errs []error
	byName := map[string]Metric{}
	for _, m := range served {
		byName[m.Name] = m
	}
	seen := map[string]bool{}
	for _, d := range documented {
		s, ok := byName[d.Name]
		switch {
		case seen[d.Name]:
			errs = append(errs, fmt.Errorf("%s is documented twice", d.Name))
		case !ok:
			errs = append(errs, fmt.Errorf("%s is documented but not served", d.Name))
		case d.String() != s.String():
			errs = append(errs, fmt.Errorf("documented %q, served %q", d, s))
		}
		seen[d.Name] = true
	}
	if all {
		for _, s := range served {
			if !seen[s.Name] {
				errs = append(errs, fmt.Errorf("%s is served but not documented", s))
			}
		}
	}
	return errs
}

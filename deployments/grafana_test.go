package deployments

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/metricsdoc"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// The Grafana dashboards in grafana/ query the kubelet plugin's metrics. The tests below
// read every PromQL expression of every dashboard and fail on a metric the plugin does
// not serve (metrics.Plugin.Names, the list the docs are checked against too) and on a
// label none of the expression's metrics has (the labels of docs/kubelet-plugin.md's
// table, which TestDocMetricTables holds to the registry), so that renaming a metric or
// a label breaks the build rather than a panel.

// targetLabels are the labels Prometheus adds to every scraped series (a ServiceMonitor's
// target labels), and le and __name__, which every histogram bucket respectively every
// series has.
var targetLabels = []string{"instance", "job", "namespace", "pod", "service", "endpoint", "container", "le", "__name__"}

// promQL is what a plain reading of a PromQL expression finds.
type promQL struct {
	// Metrics are the metric names, Labels the label names of selectors and of by,
	// without, on, ignoring, group_left and group_right lists, each sorted once.
	Metrics, Labels []string
}

var (
	quoted    = regexp.MustCompile("\"(\\\\.|[^\"\\\\])*\"|'(\\\\.|[^'\\\\])*'|`[^`]*`")
	variable  = regexp.MustCompile(`\$\{?\w+\}?`)
	rangeSel  = regexp.MustCompile(`\[[^\]]*\]|(?i)\boffset\s+-?[0-9a-z]+`)
	token     = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*|=~|!~|!=|==|[(){},=]|[^\sA-Za-z_:]`)
	listWords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	keywords  = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
)

// parsePromQL reads expr: quoted strings, Grafana's variables, range selectors and
// offsets are dropped, an identifier before "(" is a function (or, for by and friends,
// starts a list of labels), as is one before by or without (an aggregation), one before
// a matcher inside braces is a label, and every other identifier that is not a keyword is
// a metric.
func parsePromQL(expr string) promQL {
	expr = quoted.ReplaceAllString(expr, `""`)
	expr = variable.ReplaceAllString(expr, "")
	expr = rangeSel.ReplaceAllString(expr, "")
	toks := token.FindAllString(expr, -1)
	var q promQL
	inBraces, inList := false, false
	isIdent := func(s string) bool {
		return s[0] == '_' || s[0] == ':' || s[0] >= 'A' && s[0] <= 'Z' || s[0] >= 'a' && s[0] <= 'z'
	}
	for i, tok := range toks {
		next := ""
		if i+1 < len(toks) {
			next = toks[i+1]
		}
		switch {
		case tok == "{":
			inBraces = true
		case tok == "}":
			inBraces = false
		case inList && tok == ")":
			inList = false
		case !isIdent(tok):
		case inList:
			q.Labels = append(q.Labels, tok)
		case inBraces:
			if next == "=" || next == "!=" || next == "=~" || next == "!~" {
				q.Labels = append(q.Labels, tok)
			}
		case listWords[strings.ToLower(tok)] && next == "(":
			inList = true
		case next == "(" || keywords[strings.ToLower(tok)] || listWords[strings.ToLower(next)]:
		default:
			q.Metrics = append(q.Metrics, tok)
		}
	}
	slices.Sort(q.Metrics)
	slices.Sort(q.Labels)
	q.Metrics, q.Labels = slices.Compact(q.Metrics), slices.Compact(q.Labels)
	return q
}

func TestParsePromQL(t *testing.T) {
	for _, tt := range []struct {
		expr string
		want promQL
	}{
		{`rdma_dra_a_total`, promQL{Metrics: []string{"rdma_dra_a_total"}}},
		{`sum by (node, ibdev) (rate(rdma_dra_a_total{node=~"$node", claim!=""}[$__rate_interval]))`,
			promQL{Metrics: []string{"rdma_dra_a_total"}, Labels: []string{"claim", "ibdev", "node"}}},
		{`histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket[5m]))) > 0.5 and on (instance) up == 1`,
			promQL{Metrics: []string{"up", "x_seconds_bucket"}, Labels: []string{"instance", "le"}}},
		{`-sum without(port)(a{counter="by (x)"}) / ignoring (claim) group_left (mode) b_info`,
			promQL{Metrics: []string{"a", "b_info"}, Labels: []string{"claim", "counter", "mode", "port"}}},
		{`rate(a{l='it\'s {b}'}[1h] offset 5m) > bool 3`, promQL{Metrics: []string{"a"}, Labels: []string{"l"}}},
	} {
		if diff := cmp.Diff(tt.want, parsePromQL(tt.expr), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("parsePromQL(%q) (-want +got):\n%s", tt.expr, diff)
		}
	}
}

// labelValues is a Grafana template query: label_values(<expression>, <label>).
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// dashboardQueries returns every PromQL expression of a dashboard: the panels' (and
// rows' panels') targets and the template variables' queries, each with where it is.
func dashboardQueries(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name  string          `json:"name"`
				Type  string          `json:"type"`
				Query json.RawMessage `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("decode %s: %v", path, err)
	}
	out := map[string]string{}
	type panel struct {
		Title   string            `json:"title"`
		Panels  []json.RawMessage `json:"panels"`
		Targets []struct {
			RefID string `json:"refId"`
			Expr  string `json:"expr"`
		} `json:"targets"`
	}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatalf("decode a panel of %s: %v", path, err)
			}
			for _, tg := range p.Targets {
				if tg.Expr == "" {
					t.Errorf("%s: panel %q target %s has no expr", path, p.Title, tg.RefID)
				}
				out["panel "+p.Title+" "+tg.RefID] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			if err := json.Unmarshal(v.Query, &q.Query); err != nil {
				t.Fatalf("%s: variable %s: query is neither a string nor an object", path, v.Name)
			}
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("%s: variable %s: query %q is not label_values(expression, label)", path, v.Name, q.Query)
			continue
		}
		out["variable "+v.Name] = m[1]
		out["variable "+v.Name+" label"] = "x{" + m[2] + `=""}`
	}
	return out
}

// TestDashboardMetrics checks every expression of every dashboard against the served
// metrics.
func TestDashboardMetrics(t *testing.T) {
	served := map[string]bool{}
	for _, n := range metrics.NewPlugin().Names() {
		served[n] = true
	}
	documented, err := metricsdoc.Documented("../docs/kubelet-plugin.md", metrics.Namespace+"_")
	if err != nil {
		t.Fatal(err)
	}
	labelsOf := map[string][]string{}
	for _, m := range documented {
		labelsOf[m.Name] = m.Labels
	}
	files, err := filepath.Glob("grafana/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in grafana/: %v", err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			queries := dashboardQueries(t, file)
			if len(queries) < 10 {
				t.Fatalf("%d queries found: the reading of the dashboard is broken", len(queries))
			}
			usedMetrics := map[string]bool{}
			for where, expr := range queries {
				q := parsePromQL(expr)
				if len(q.Metrics) == 0 {
					t.Errorf("%s: no metric in %q", where, expr)
				}
				allowed := slices.Clone(targetLabels)
				for _, name := range q.Metrics {
					if strings.HasSuffix(where, " label") {
						continue // the label of label_values, checked against its expression's
					}
					base := name
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if trimmed, ok := strings.CutSuffix(name, suffix); ok && served[trimmed] {
							base = trimmed
						}
					}
					if !served[base] {
						t.Errorf("%s: %s is not a metric the plugin serves (%q)", where, name, expr)
						continue
					}
					usedMetrics[base] = true
					allowed = append(allowed, labelsOf[base]...)
				}
				if strings.HasSuffix(where, " label") {
					allowed = append(allowed, labelsOf[parsePromQL(queries[strings.TrimSuffix(where, " label")]).Metrics[0]]...)
				}
				for _, l := range q.Labels {
					if !slices.Contains(allowed, l) {
						t.Errorf("%s: label %s is not a label of %v (%q)", where, l, q.Metrics, expr)
					}
				}
			}
			// The dashboard shows what operators asked for: traffic, errors, link downs,
			// flapping, CNP/ECN and the claims that hold each port.
			for _, name := range []string{"rdma_dra_port_transmit_bytes_total", "rdma_dra_port_receive_bytes_total", "rdma_dra_port_symbol_errors_total",
				"rdma_dra_port_link_downed_total", "rdma_dra_port_flapping", "rdma_dra_port_hw_stat_total", "rdma_dra_port_claim_info"} {
				if !usedMetrics[name] {
					t.Errorf("no panel shows %s", name)
				}
			}
		})
	}
}

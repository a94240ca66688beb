package schedperf

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// writeConfig writes the config against a stand-in for scheduler_perf's template
// directory and decodes it.
func writeConfig(t *testing.T) (testCase, string) {
	t.Helper()
	upstream := t.TempDir()
	if _, err := upstreamPaths(upstream); err == nil {
		t.Fatal("no error for a template directory without the templates")
	}
	for _, name := range []string{"node-with-dra-test-driver.yaml", "resourceslice-basic-devices.yaml", "deviceclass.yaml",
		"resourceclaimtemplate.yaml", "resourceclaim.yaml", "pod-with-claim-template.yaml"} {
		if err := os.WriteFile(filepath.Join(upstream, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	up, err := upstreamPaths(upstream)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path, err := Write(context.Background(), Options{Repo: repoRoot, Upstream: upstream, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if path != filepath.Join(dir, "performance-config.yaml") {
		t.Errorf("config written to %s, want it in %s", path, dir)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := yaml.UnmarshalStrict(data, &cases); err != nil {
		t.Fatalf("decode the config: %v\n%s", err, data)
	}
	if len(cases) != 1 || cases[0].Name != TestCase {
		t.Fatalf("config has test cases %+v, want one, %s", cases, TestCase)
	}
	return cases[0], up.node
}

// TestConfigOps: every template path exists and is absolute; the ops create nodes, the
// reference slice and each of our slice positions, and end with the measured pods.
func TestConfigOps(t *testing.T) {
	tc, nodeTemplate := writeConfig(t)
	var slicePaths []string
	for i, o := range tc.WorkloadTemplate {
		for _, p := range []string{o.NodeTemplatePath, o.TemplatePath, o.PodTemplatePath} {
			if p == "" {
				continue
			}
			if !filepath.IsAbs(p) {
				t.Errorf("op %d: path %s is relative; scheduler_perf opens it from the package directory", i, p)
			}
			if _, err := os.Stat(p); err != nil {
				t.Errorf("op %d: %v", i, err)
			}
			if strings.Contains(filepath.Base(p), "-slice-") {
				slicePaths = append(slicePaths, p)
			}
		}
	}
	if first := tc.WorkloadTemplate[0]; first.Opcode != "createNodes" || first.NodeTemplatePath != nodeTemplate {
		t.Errorf("first op %+v, want createNodes from %s", first, nodeTemplate)
	}
	if last := tc.WorkloadTemplate[len(tc.WorkloadTemplate)-1]; last.Opcode != "createPods" || !last.CollectMetrics || !last.SteadyState {
		t.Errorf("last op %+v, want createPods in a steady state with metrics", last)
	}
	// One per slice of a dgx-h100 node in each variant: the default and the
	// few-attributes model's two counter slices and one device slice, one device slice
	// of the capacity and of the per-NIC model.
	if len(slicePaths) != 3+1+1+3 {
		t.Errorf("%d ops create our slices (%v), want one per slice of a %s node and variant: 8", len(slicePaths), slicePaths, DefaultProfile)
	}
}

// TestConfigParams: scheduler_perf fails a workload with a parameter its ops do not
// use, or an op parameter the workload does not set; the labels select the sizes.
func TestConfigParams(t *testing.T) {
	tc, _ := writeConfig(t)
	used := map[string]bool{}
	for _, o := range tc.WorkloadTemplate {
		for _, p := range []string{o.CountParam, o.DurationParam} {
			if p != "" {
				used[strings.TrimPrefix(p, "$")] = true
			}
		}
		for _, v := range o.TemplateParams {
			if s, ok := v.(string); ok && strings.HasPrefix(s, "$") {
				used[strings.TrimPrefix(s, "$")] = true
			}
		}
	}
	names := map[string]bool{}
	for _, w := range tc.Workloads {
		if names[w.Name] {
			t.Errorf("workload %s appears twice", w.Name)
		}
		names[w.Name] = true
		for p := range w.Params {
			if !used[p] {
				t.Errorf("workload %s: parameter %s is used by no op", w.Name, p)
			}
		}
		for p := range used {
			if _, ok := w.Params[p]; !ok {
				t.Errorf("workload %s: parameter %s is not set", w.Name, p)
			}
		}
		want := []string{SmokeLabel}
		if strings.HasSuffix(w.Name, "_1000nodes") {
			want = []string{FullLabel}
		}
		if side, _, _ := strings.Cut(w.Name, "_"); strings.Contains(side, "-") {
			want = append(want, AlternativeLabel)
		}
		if !slices.Equal(w.Labels, want) {
			t.Errorf("workload %s: labels %v, want %v", w.Name, w.Labels, want)
		}
	}
	// 8 sides: the reference, two pods of three variants, the per-NIC model's whole
	// port; the smoke size at half fill, the full size empty and half.
	if want := 8 * 3; len(tc.Workloads) != want {
		t.Errorf("%d workloads, want %d", len(tc.Workloads), want)
	}
}

// TestConfigWorkloads: the same ops, switched by counts: the nodes carry the reference
// slices or ours, one claim template exists, the fill takes half of the nodes' units.
func TestConfigWorkloads(t *testing.T) {
	tc, _ := writeConfig(t)
	byName := map[string]map[string]any{}
	for _, w := range tc.Workloads {
		byName[w.Name] = w.Params
	}
	// ours is the parameters of a workload that are all 0 but those set.
	params := func(set map[string]any) map[string]any {
		p := map[string]any{"referenceSlices": 0.0, "referenceFillClaims": 0.0, "referenceClaimTemplate": 0.0}
		for _, v := range []string{"rdma", "capacity", "pernic", "fewattrs"} {
			p[v+"Slices"], p[v+"FillClaims"] = 0.0, 0.0
		}
		for _, s := range []string{"share", "port", "capacityshare", "capacityport", "pernicport", "fewattrsshare", "fewattrsport"} {
			p[s+"ClaimTemplate"] = 0.0
		}
		for k, v := range set {
			p[k] = v
		}
		return p
	}
	tests := []struct {
		workload string
		want     map[string]any
	}{
		{"reference_half_50nodes", params(map[string]any{"nodes": 50.0, "referenceSlices": 50.0,
			"referenceFillClaims": 250.0, "referenceClaimTemplate": 1.0, "duration": "10s"})},
		{"share_half_50nodes", params(map[string]any{"nodes": 50.0, "rdmaSlices": 50.0,
			"rdmaFillClaims":     250.0, // 5 of 10 ports
			"shareClaimTemplate": 1.0, "duration": "10s"})},
		{"reference_half_1000nodes", params(map[string]any{"nodes": 1000.0, "referenceSlices": 1000.0,
			"referenceFillClaims":    5000.0, // 5 of 10 devices
			"referenceClaimTemplate": 1.0, "duration": "30s"})},
		{"port_empty_1000nodes", params(map[string]any{"nodes": 1000.0, "rdmaSlices": 1000.0,
			"portClaimTemplate": 1.0, "duration": "30s"})},
		{"capacity-port_half_1000nodes", params(map[string]any{"nodes": 1000.0, "capacitySlices": 1000.0,
			"capacityFillClaims": 5000.0, "capacityportClaimTemplate": 1.0, "duration": "30s"})},
		{"pernic-port_empty_1000nodes", params(map[string]any{"nodes": 1000.0, "pernicSlices": 1000.0,
			"pernicportClaimTemplate": 1.0, "duration": "30s"})},
		{"fewattrs-share_half_1000nodes", params(map[string]any{"nodes": 1000.0, "fewattrsSlices": 1000.0,
			"fewattrsFillClaims": 5000.0, "fewattrsshareClaimTemplate": 1.0, "duration": "30s"})},
	}
	for _, tt := range tests {
		t.Run(tt.workload, func(t *testing.T) {
			got, ok := byName[tt.workload]
			if !ok {
				t.Fatalf("no workload %s", tt.workload)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("params (-want +got):\n%s", diff)
			}
		})
	}
}

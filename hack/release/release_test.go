package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const testRepository = "ghcr.io/rdma-dra/rdma-dra-driver"

// fixture is a repository whose version files agree on 1.2.3; each test changes one.
type fixture map[string]string

func agreeing() fixture {
	pod := func(image string) string {
		return "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: p}\nspec:\n  template:\n    spec:\n" +
			"      initContainers: [{name: init, image: " + image + "}]\n" +
			"      containers: [{name: plugin, image: " + image + "}]\n"
	}
	return fixture{
		"VERSION": "1.2.3\n",
		"deployments/helm/rdma-dra-driver/Chart.yaml": "apiVersion: v2\nname: rdma-dra-driver\n# the chart\n" +
			"version: 1.2.3\nappVersion: \"v1.2.3\"\nkeywords: [dra]\n",
		"deployments/helm/rdma-dra-driver/values.yaml": "image:\n  # -- the image\n  repository: " + testRepository +
			"\n  tag: \"\"\n  pullPolicy: IfNotPresent\n",
		"deployments/static/rdma-dra-driver.yaml":      "# generated\n---\n" + pod(testRepository+":v1.2.3") + "---\napiVersion: v1\nkind: Namespace\nmetadata: {name: x}\n",
		"deployments/static/rdma-dra-driver-mock.yaml": pod(testRepository + ":v1.2.3"),
		"deployments/static/rdma-dra-driver-crds.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: a.b}\n",
		"CHANGELOG.md": "# Changelog\n\n## [Unreleased]\n\n- next\n\n## [1.2.3] - 2026-11-27\n\n### Added\n\n- the driver\n\n" +
			"## [1.2.2] - 2026-10-01\n\n- old\n\n[1.2.3]: https://example.com/v1.2.3\n",
	}
}

func (f fixture) write(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range f {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		version string
		change  func(f fixture)
		wantErr []string // parts of the error; none: the check passes
	}{
		{name: "agreeing", version: "1.2.3"},
		{name: "tag ahead of the VERSION file", version: "1.3.0",
			wantErr: []string{"VERSION says 1.2.3 but the version released is 1.3.0", "version is \"1.2.3\", want \"1.3.0\"",
				"appVersion is \"v1.2.3\", want \"v1.3.0\"", "image " + testRepository + ":v1.2.3, want " + testRepository + ":v1.3.0",
				"has no section for 1.3.0"}},
		{name: "VERSION with a v", version: "1.2.3", change: func(f fixture) { f["VERSION"] = "v1.2.3\n" },
			wantErr: []string{`"v1.2.3" is not a version X.Y.Z`}},
		{name: "VERSION missing", version: "1.2.3", change: func(f fixture) { delete(f, "VERSION") },
			wantErr: []string{"read the version"}},
		{name: "chart version stale", version: "1.2.3", change: func(f fixture) {
			f["deployments/helm/rdma-dra-driver/Chart.yaml"] = strings.Replace(f["deployments/helm/rdma-dra-driver/Chart.yaml"], "version: 1.2.3", "version: 1.2.2", 1)
		}, wantErr: []string{`Chart.yaml: version is "1.2.2", want "1.2.3"`}},
		{name: "appVersion without v", version: "1.2.3", change: func(f fixture) {
			f["deployments/helm/rdma-dra-driver/Chart.yaml"] = strings.Replace(f["deployments/helm/rdma-dra-driver/Chart.yaml"], `"v1.2.3"`, "1.2.3", 1)
		}, wantErr: []string{`appVersion is "1.2.3", want "v1.2.3"`}},
		{name: "values pin a tag", version: "1.2.3", change: func(f fixture) {
			f["deployments/helm/rdma-dra-driver/values.yaml"] = strings.Replace(f["deployments/helm/rdma-dra-driver/values.yaml"], `tag: ""`, "tag: v1.2.2", 1)
		}, wantErr: []string{`image.tag is "v1.2.2", want empty`}},
		{name: "values name another repository", version: "1.2.3", change: func(f fixture) {
			f["deployments/helm/rdma-dra-driver/values.yaml"] = strings.Replace(f["deployments/helm/rdma-dra-driver/values.yaml"], testRepository, "quay.io/x/y", 1)
		}, wantErr: []string{`image.repository is "quay.io/x/y"`}},
		{name: "static init container stale", version: "1.2.3", change: func(f fixture) {
			f["deployments/static/rdma-dra-driver-mock.yaml"] = strings.Replace(f["deployments/static/rdma-dra-driver-mock.yaml"], ":v1.2.3", ":v1.2.2", 1)
		}, wantErr: []string{"rdma-dra-driver-mock.yaml: image " + testRepository + ":v1.2.2, want"}},
		{name: "static without images", version: "1.2.3", change: func(f fixture) {
			delete(f, "deployments/static/rdma-dra-driver.yaml")
			delete(f, "deployments/static/rdma-dra-driver-mock.yaml")
		}, wantErr: []string{"no image in the manifests"}},
		{name: "no CHANGELOG", version: "1.2.3", change: func(f fixture) { delete(f, "CHANGELOG.md") },
			wantErr: []string{`CHANGELOG.md does not exist: the release of 1.2.3 needs a section "## [1.2.3] - YYYY-MM-DD"`}},
		{name: "CHANGELOG without the section", version: "1.2.3", change: func(f fixture) {
			f["CHANGELOG.md"] = "# Changelog\n\n## [Unreleased]\n\n- the driver\n"
		}, wantErr: []string{`has no section for 1.2.3: add "## [1.2.3] - YYYY-MM-DD"`}},
		{name: "CHANGELOG section undated", version: "1.2.3", change: func(f fixture) {
			f["CHANGELOG.md"] = "## [1.2.3] - soon\n\n- the driver\n"
		}, wantErr: []string{`dated "soon", want YYYY-MM-DD`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := agreeing()
			if tt.change != nil {
				tt.change(f)
			}
			err := check(layoutAt(f.write(t)), tt.version, testRepository)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("check: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("check passed, want an error with %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\ndoes not say %q", err, want)
				}
			}
		})
	}
}

func TestSetChartVersion(t *testing.T) {
	f := agreeing()
	dir := f.write(t)
	l := layoutAt(dir)
	if err := setChartVersion(l.chartFile, "2.0.0-rc.1"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(l.chartFile)
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: v2\nname: rdma-dra-driver\n# the chart\nversion: 2.0.0-rc.1\nappVersion: \"v2.0.0-rc.1\"\nkeywords: [dra]\n"
	if string(got) != want {
		t.Errorf("Chart.yaml:\n%s\nwant:\n%s", got, want)
	}
	if errs := checkChart(l.chartFile, "2.0.0-rc.1"); len(errs) != 0 {
		t.Errorf("check after set-chart: %v", errs)
	}

	if err := os.WriteFile(l.chartFile, []byte("apiVersion: v2\nappVersion: v1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setChartVersion(l.chartFile, "1.0.0"); err == nil || !strings.Contains(err.Error(), "want one top-level version line, found 0") {
		t.Errorf("set-chart without a version line: %v", err)
	}
}

func TestChangelogSection(t *testing.T) {
	file := filepath.Join(agreeing().write(t), "CHANGELOG.md")
	tests := []struct {
		version, want, wantErr string
	}{
		{version: "1.2.3", want: "### Added\n\n- the driver\n"},
		{version: "1.2.2", want: "- old\n"}, // the link definitions at the end are not notes
		{version: "Unreleased", want: "- next\n"},
		{version: "1.2.4", wantErr: "has no section for 1.2.4"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			got, err := changelogSection(file, tt.version)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("notes %q, want %q", got, tt.want)
			}
		})
	}

	for name, content := range map[string]string{
		"empty section":  "## [1.2.3] - 2026-11-27\n\n## [1.2.2] - 2026-10-01\n- old\n",
		"twice":          "## [1.2.3] - 2026-11-27\n- a\n## [1.2.3] - 2026-11-28\n- b\n",
		"date not a day": "## [1.2.3] - 2026-13-01\n- a\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "CHANGELOG.md")
			if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := changelogSection(file, "1.2.3"); err == nil {
				t.Errorf("no error for\n%s", content)
			}
		})
	}
}

func TestRun(t *testing.T) {
	dir := agreeing().write(t)
	out := filepath.Join(dir, "_output", "notes.md")
	if err := run([]string{"notes", "-repo", dir, "-version", "v1.2.3", "-o", out}); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != "### Added\n\n- the driver\n" {
		t.Errorf("notes file %q (%v)", got, err)
	}
	if err := run([]string{"check", "-repo", dir}); err == nil || !strings.Contains(err.Error(), "-repository is required") {
		t.Errorf("check without -repository: %v", err)
	}
	if err := run([]string{"check", "-repo", dir, "-repository", testRepository}); err != nil {
		t.Errorf("check with the VERSION file's version: %v", err)
	}
	if err := run([]string{"check", "-repo", dir, "-repository", testRepository, "-version", "1.2"}); err == nil {
		t.Error("check accepted -version 1.2")
	}
	if err := run([]string{"publish"}); err == nil || !strings.Contains(err.Error(), `unknown subcommand "publish"`) {
		t.Errorf("unknown subcommand: %v", err)
	}
}

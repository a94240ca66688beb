package doclinks

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The repository's documents, checked here because `make test` runs every package's tests:
// a page left out of the index, a link that leads nowhere, a file that points outside the
// repository, and a README or CONTRIBUTING.md that no longer says what the code does.

// root is the repository's root, from this package's directory.
const root = "../../.."

// skipDir reports whether a directory holds no file of the repository: git's own, and
// build output (.gitignore's /_output/ and /test/_output/).
func skipDir(name string) bool { return name == ".git" || name == "_output" }

// repoFiles returns the repository's files (paths relative to root, with slashes) for
// which keep is true.
func repoFiles(t *testing.T, keep func(rel string, d fs.DirEntry) bool) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel = filepath.ToSlash(rel); d.Type().IsRegular() && keep(rel, d) {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDocsIndex: every page of docs/ is linked from docs/README.md, the index by reader,
// so that a new page cannot be left where nobody finds it.
func TestDocsIndex(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(root, "docs", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	linked := map[string]bool{}
	for _, l := range Links(index) {
		if IsLocal(l.Target) {
			file, _, _ := strings.Cut(l.Target, "#")
			linked[filepath.ToSlash(filepath.Clean(filepath.Join("docs", file)))] = true
		}
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) < 2 {
		t.Fatalf("found %d pages in docs/; the test looks in the wrong place", len(pages))
	}
	for _, p := range pages {
		rel := "docs/" + filepath.Base(p)
		if rel != "docs/README.md" && !linked[rel] {
			t.Errorf("%s is not linked from docs/README.md: add it to the index, under the readers it is for", rel)
		}
	}
}

// TestLinksResolve: every relative link of every Markdown file of the repository names a
// file that exists, and a fragment names a heading of its document.
func TestLinksResolve(t *testing.T) {
	files := repoFiles(t, func(rel string, _ fs.DirEntry) bool { return strings.HasSuffix(rel, ".md") })
	for _, must := range []string{"README.md", "CONTRIBUTING.md", "docs/README.md"} {
		if !slices.Contains(files, must) {
			t.Errorf("%s not found", must)
		}
	}
	for _, f := range files {
		for _, err := range Check(root, filepath.Join(root, filepath.FromSlash(f))) {
			t.Error(strings.TrimPrefix(err.Error(), root+"/"))
		}
	}
}

// TestNothingPointsOutside: no file of the repository refers to the directory next to it
// that held the design notes during development. The repository carries its own docs; a
// reader of a clone has nothing beside it.
func TestNothingPointsOutside(t *testing.T) {
	outside := []byte("../" + "shared") // spelt in two so that this file does not match itself
	files := repoFiles(t, func(_ string, d fs.DirEntry) bool {
		info, err := d.Info()
		return err == nil && info.Size() < 1<<20 // built binaries, not sources
	})
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if bytes.Contains(line, outside) {
				t.Errorf("%s:%d refers to %s, outside the repository: %s", f, i+1, outside, bytes.TrimSpace(line))
			}
		}
	}
}

// TestReadmeLength: the README stays a front page (what it is, a quick start, the install
// commands); everything longer belongs in docs/.
func TestReadmeLength(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(data, []byte("\n")); n >= 200 {
		t.Errorf("README.md has %d lines, want fewer than 200: move detail to docs/ and link it", n)
	}
}

// TestReadmeChartVersion: the README installs the chart's current version, so that the
// commands a user copies install what the repository holds.
func TestReadmeChartVersion(t *testing.T) {
	chart, err := os.ReadFile(filepath.Join(root, "deployments", "helm", "rdma-dra-driver", "Chart.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^version:\s*"?([^"\s]+)"?\s*$`).FindSubmatch(chart)
	if m == nil {
		t.Fatal("Chart.yaml has no version line")
	}
	version := string(m[1])
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	refs := regexp.MustCompile(`oci://ghcr\.io/rdma-dra/charts/rdma-dra-driver --version[ =]([^\s`+"`"+`]+)`).FindAllSubmatch(readme, -1)
	if len(refs) == 0 {
		t.Fatal("README.md names no oci://ghcr.io/rdma-dra/charts/rdma-dra-driver --version: the pattern no longer matches it")
	}
	for _, r := range refs {
		if v := string(r[1]); v != version {
			t.Errorf("README.md installs chart version %s, Chart.yaml is %s", v, version)
		}
	}
}

// makeTarget matches a documented target of the Makefile or mk/*.mk, as `make help`
// lists them: "name: ... ## description".
var makeTarget = regexp.MustCompile(`(?m)^([a-z][a-zA-Z0-9_-]*):.*## `)

// TestContributingListsMakeTargets: CONTRIBUTING.md names every make target that `make
// help` lists, so that a new target is documented where contributors look.
func TestContributingListsMakeTargets(t *testing.T) {
	contributing, err := os.ReadFile(filepath.Join(root, "CONTRIBUTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	makefiles, err := filepath.Glob(filepath.Join(root, "mk", "*.mk"))
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, f := range append([]string{filepath.Join(root, "Makefile")}, makefiles...) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range makeTarget.FindAllSubmatch(data, -1) {
			targets = append(targets, string(m[1]))
		}
	}
	if len(targets) < 10 {
		t.Fatalf("found %d make targets; the pattern no longer matches the Makefile", len(targets))
	}
	for _, target := range targets {
		if !bytes.Contains(contributing, []byte("`make "+target+"`")) {
			t.Errorf("CONTRIBUTING.md does not list `make %s`: add a row to its table of make targets", target)
		}
	}
}

// TestReadmeTestCommands: the README's test commands are what .ci/run runs, so that the
// commands a contributor copies are the ones CI holds the project to. Both sides are
// compared as sets of make invocations (the README joins commands with &&; what follows
// a # is a comment).
func TestReadmeTestCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(readme), "<!-- tests: the commands of .ci/run -->")
	if !ok {
		t.Fatal("README.md has no block marked <!-- tests: the commands of .ci/run -->")
	}
	block, _, _ = strings.Cut(strings.TrimPrefix(strings.TrimSpace(block), "```console"), "```")
	var fromReadme []string
	for line := range strings.Lines(block) {
		line, _, _ = strings.Cut(line, "#")
		for cmd := range strings.SplitSeq(strings.TrimPrefix(strings.TrimSpace(line), "$"), "&&") {
			if cmd = strings.TrimSpace(cmd); cmd != "" {
				fromReadme = append(fromReadme, makeInvocations(cmd)...)
			}
		}
	}
	var fromCI []string
	for line := range strings.Lines(string(ci)) {
		// .ci/run times each command with its step function, env setting the variables.
		line = strings.TrimPrefix(strings.TrimPrefix(strings.TrimSpace(line), "step "), "env ")
		if strings.HasPrefix(line, "make ") || makeWithEnvRE.MatchString(line) {
			fromCI = append(fromCI, makeInvocations(line)...)
		}
	}
	slices.Sort(fromReadme)
	slices.Sort(fromCI)
	if !slices.Equal(fromReadme, fromCI) {
		t.Errorf("README.md's test commands differ from .ci/run's:\nREADME: %q\n.ci/run: %q", fromReadme, fromCI)
	}
}

// makeWithEnvRE matches a make command line that sets environment variables first.
var makeWithEnvRE = regexp.MustCompile(`^([A-Z_]+=\S+ )+make `)

// makeInvocations splits one command line into one invocation per goal, each with the
// line's environment and variables: "make a b X=1" is "make a X=1" and "make b X=1".
func makeInvocations(line string) []string {
	var env, goals, vars []string
	seenMake := false
	for _, f := range strings.Fields(line) {
		switch {
		case f == "make":
			seenMake = true
		case !seenMake:
			env = append(env, f)
		case strings.Contains(f, "="):
			vars = append(vars, f)
		default:
			goals = append(goals, f)
		}
	}
	var out []string
	for _, g := range goals {
		out = append(out, strings.Join(slices.Concat(env, []string{"make", g}, vars), " "))
	}
	return out
}

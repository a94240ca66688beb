package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeMarker starts the line that names a command block of the README for the suite:
// "<!-- e2e:<name> ... -->", followed by a ```console block of "$ " lines.
const readmeMarker = "<!-- e2e:"

// ReadmeBlock returns the commands of the README's block of that name, without their
// "$ " prompts. It is an error if the marker is missing or given twice, if no console
// block follows it, or if the block holds anything but commands (an output line would
// be taken for nothing and hide a command the suite never ran).
func ReadmeBlock(readme []byte, name string) ([]string, error) {
	var (
		cmds                                  []string
		found, afterMarkerLine, inBlock, done bool
		line, markerAt                        int
	)
	sc := bufio.NewScanner(bytes.NewReader(readme))
	for sc.Scan() {
		line++
		text := sc.Text()
		if rest, ok := strings.CutPrefix(text, readmeMarker); ok {
			if n, _, _ := strings.Cut(strings.TrimSuffix(rest, "-->"), " "); strings.TrimSpace(n) == name {
				if found {
					return nil, fmt.Errorf("README block %q is marked twice (lines %d and %d)", name, markerAt, line)
				}
				found, markerAt, afterMarkerLine = true, line, true
				continue
			}
		}
		switch {
		case afterMarkerLine:
			afterMarkerLine = false
			if text != "```console" {
				return nil, fmt.Errorf("README line %d: the block %q marked on line %d must start with ```console, got %q", line, name, markerAt, text)
			}
			inBlock = true
		case inBlock && text == "```":
			inBlock, done = false, true
		case inBlock:
			cmd, ok := strings.CutPrefix(text, "$ ")
			if !ok || strings.TrimSpace(cmd) == "" {
				return nil, fmt.Errorf("README line %d: the block %q holds %q, not a \"$ \" command", line, name, text)
			}
			cmds = append(cmds, cmd)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	switch {
	case !found:
		return nil, fmt.Errorf("the README has no block %q (a line %s%s -->)", name, readmeMarker, name)
	case !done:
		return nil, fmt.Errorf("README block %q marked on line %d is not a closed ```console block", name, markerAt)
	case len(cmds) == 0:
		return nil, fmt.Errorf("README block %q marked on line %d has no commands", name, markerAt)
	}
	return cmds, nil
}

// The chart the README installs: the published chart at its version, which Localize
// replaces with the repository's own chart directory (the tree under test, relative to
// the repository root RunReadme runs the commands in).
const (
	PublishedChart = "oci://ghcr.io/rdma-dra/charts/rdma-dra-driver"
	RepoChart      = "deployments/helm/rdma-dra-driver"
)

var (
	// publishedChartArg is PublishedChart as one word of a command.
	publishedChartArg = regexp.MustCompile(`(^|\s)` + regexp.QuoteMeta(PublishedChart) + `(\s|$)`)
	// versionFlag is helm's --version with its value, which picks a published chart's
	// version and has no meaning for a chart directory.
	versionFlag = regexp.MustCompile(`\s--version(?:=|\s+)\S+`)
)

// Localize turns a README command into the one that does the same on the local cluster:
// helm install and upgrade take the repository's chart instead of the published one
// (PublishedChart and its --version become RepoChart) and get the cluster's values files
// appended (its kubelet directory, mock mode and the local image are not the chart's
// defaults), and the static manifests are read from staticDir, where they were rendered
// from the same chart with the same values. Nothing else of the command changes.
func Localize(cmd string, values []string, staticDir string) string {
	if strings.HasPrefix(cmd, "helm install ") || strings.HasPrefix(cmd, "helm upgrade ") {
		if publishedChartArg.MatchString(cmd) {
			cmd = publishedChartArg.ReplaceAllString(cmd, "${1}"+RepoChart+"${2}")
			cmd = versionFlag.ReplaceAllString(cmd, "")
		}
		for _, v := range values {
			cmd += " --values " + shellQuote(v)
		}
	}
	return strings.ReplaceAll(cmd, "deployments/static/", strings.TrimSuffix(staticDir, "/")+"/")
}

// shellQuote quotes s for bash.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// RenderStatic renders the static manifests the way make manifests does, with the
// cluster's values and the suite's, into a new directory of the test.
func (e *Env) RenderStatic(t *testing.T, ctx context.Context) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := e.run(ctx, filepath.Join(e.Repo, "hack", "render-manifests.sh"), append([]string{e.helm, dir}, e.ValuesArgs()...)...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// RunReadme runs the commands in the repository's root with bash, one by one, with the
// suite's helm and kubectl first on PATH and the cluster's kubeconfig in KUBECONFIG, and
// fails the test at the first that fails, naming it.
func (e *Env) RunReadme(t *testing.T, ctx context.Context, cmds []string) {
	t.Helper()
	bin := t.TempDir()
	for name, target := range map[string]string{"helm": e.helm, "kubectl": e.kubectl} {
		if err := os.Symlink(target, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range cmds {
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", c)
		cmd.Dir, cmd.Stdout, cmd.Stderr = e.Repo, &out, &out
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+e.Kubeconfig)
		err := cmd.Run()
		t.Logf("$ %s\n%s", c, strings.TrimRight(out.String(), "\n"))
		if err != nil {
			t.Fatalf("README command failed: %s: %v", c, err)
		}
	}
}

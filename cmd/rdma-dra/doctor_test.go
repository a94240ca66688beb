package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/rdma-dra/rdma-dra-driver/pkg/doctor"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// doctorArgs runs doctor on the mock node below root with an empty /proc, no runtime
// configs, one CDI directory and no cluster, so that nothing of the machine the test runs
// on leaks in.
func doctorArgs(t *testing.T, root string, more ...string) []string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{"proc", "dev", "cdi"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return append([]string{"doctor", "--sysfs-root", root, "--dev-root", filepath.Join(dir, "dev"),
		"--proc-root", filepath.Join(dir, "proc"), "--containerd-config", filepath.Join(dir, "containerd.toml"),
		"--crio-config", filepath.Join(dir, "crio.conf"), "--cdi-dirs", filepath.Join(dir, "cdi"), "--no-cluster"}, more...)
}

// TestDoctorExitStatus: a failed check is exit status 1 with the failed checks named on
// stderr; the table has one line per check and a summary.
func TestDoctorExitStatus(t *testing.T) {
	root := writeProfile(t, "mixed-bond", "Y")
	stdout, stderr, code := runApp(t, "", doctorArgs(t, root)...)
	if code != 1 {
		t.Errorf("exit status %d, want 1\n%s%s", code, stdout, stderr)
	}
	if want := "rdma-dra: 1 of 12 checks failed: char-devices\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
	for _, s := range []string{"FAIL  char-devices ", "SKIP  container-runtime ", "SKIP  cluster            not checked (--no-cluster)\n", "\n12 checks: 8 OK, 0 WARN, 1 FAIL, 3 SKIP\n"} {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout lacks %q:\n%s", s, stdout)
		}
	}
}

// TestDoctorDocument: -o json and -o yaml write the same versioned document with the
// fields check, status, found and fix.
func TestDoctorDocument(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	type doc struct {
		Version string `json:"version" yaml:"version"`
		Checks  []struct {
			Check  string `json:"check" yaml:"check"`
			Status string `json:"status" yaml:"status"`
			Found  string `json:"found" yaml:"found"`
			Fix    string `json:"fix" yaml:"fix"`
			// Details is compared as text: a slice would make the struct incomparable.
			Details any `json:"details" yaml:"details"`
		} `json:"checks" yaml:"checks"`
	}
	var fromJSON, fromYAML doc
	args := doctorArgs(t, root)
	out, _, code := runApp(t, "", append(args, "-o", "json")...)
	if code != 1 {
		t.Errorf("json: exit status %d, want 1", code)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fromJSON); err != nil {
		t.Fatalf("decode json: %v\n%s", err, out)
	}
	out, _, _ = runApp(t, "", append(args, "-o", "yaml")...)
	if err := yaml.Unmarshal([]byte(out), &fromYAML); err != nil {
		t.Fatalf("decode yaml: %v\n%s", err, out)
	}
	if fromJSON.Version != doctor.DocumentVersion || len(fromJSON.Checks) == 0 {
		t.Fatalf("document %+v", fromJSON)
	}
	failed := 0
	for i, c := range fromJSON.Checks {
		if c.Check == "" || c.Found == "" {
			t.Errorf("check %d without name or finding: %+v", i, c)
		}
		if c.Status == "FAIL" {
			failed++
			if c.Fix == "" {
				t.Errorf("%s fails without a fix", c.Check)
			}
		}
		if i < len(fromYAML.Checks) && fmt.Sprint(fromYAML.Checks[i]) != fmt.Sprint(c) {
			t.Errorf("yaml check %d %+v, json %+v", i, fromYAML.Checks[i], c)
		}
	}
	if failed != 1 || len(fromYAML.Checks) != len(fromJSON.Checks) {
		t.Errorf("%d failed, %d yaml checks, %d json checks", failed, len(fromYAML.Checks), len(fromJSON.Checks))
	}
}

// TestDoctorFlags: usage errors are exit status 2, the env twins work, and
// --warnings-as-errors turns a warning into exit status 1. With real character devices
// (root only) the node passes.
func TestDoctorFlags(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	if _, stderr, code := runApp(t, "", doctorArgs(t, root, "-o", "xml")...); code != 2 || !strings.Contains(stderr, `unknown output format "xml"`) {
		t.Errorf("-o xml: status %d, stderr %q", code, stderr)
	}
	if _, stderr, code := runApp(t, "", "doctor", root); code != 2 || !strings.Contains(stderr, "did you mean --sysfs-root") {
		t.Errorf("positional root: status %d, stderr %q", code, stderr)
	}
	args := doctorArgs(t, root)
	t.Run("env twin", func(t *testing.T) {
		t.Setenv("RDMA_DRA_OUTPUT", "json")
		if out, _, _ := runApp(t, "", args...); !strings.HasPrefix(out, "{") {
			t.Errorf("RDMA_DRA_OUTPUT=json gave:\n%s", out)
		}
	})

	if os.Geteuid() != 0 {
		t.Skip("the passing run needs mknod, which needs root")
	}
	dev := args[4]
	p, err := mocknode.Lookup("soft-roce")
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Node().MakeDevNodes(dev); err != nil {
		t.Skipf("cannot mknod here: %v", err)
	}
	if out, stderr, code := runApp(t, "", args...); code != 0 {
		t.Fatalf("with devices: status %d\n%s%s", code, out, stderr)
	}
	// Without ib_core's netns_mode file the netns check warns.
	if err := os.Remove(filepath.Join(root, "module/ib_core/parameters/netns_mode")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDMA_DRA_WARNINGS_AS_ERRORS", "true")
	if out, stderr, code := runApp(t, "", args...); code != 1 || !strings.Contains(stderr, "checks warned (--warnings-as-errors): rdma-netns") {
		t.Errorf("warnings as errors: status %d, stderr %q\n%s", code, stderr, out)
	}
}

// TestDoctorClusterAccess: without any kubeconfig and outside a pod the cluster checks are
// one SKIP that says how to get them; a kubeconfig that cannot be loaded is a usage error
// that names it.
func TestDoctorClusterAccess(t *testing.T) {
	root := writeProfile(t, "soft-roce", "Y")
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	args := doctorArgs(t, root)
	args = args[:len(args)-1] // without --no-cluster
	stdout, stderr, _ := runApp(t, "", args...)
	if want := "SKIP  cluster            not checked: no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a pod\n"; !strings.Contains(stdout, want) {
		t.Errorf("stdout lacks %q:\n%s%s", want, stdout, stderr)
	}
	missing := filepath.Join(t.TempDir(), "kubeconfig")
	_, stderr, code := runApp(t, "", append(args, "--kubeconfig", missing)...)
	if code != 2 || !strings.Contains(stderr, "load the kubeconfig") || !strings.Contains(stderr, missing) {
		t.Errorf("--kubeconfig %s: status %d, stderr %q; want 2 naming the file", missing, code, stderr)
	}
}

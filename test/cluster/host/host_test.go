package host

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestDetect(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux only")
	}
	if _, err := os.Stat("/proc/net/route"); err != nil {
		t.Skip("no /proc/net/route")
	}
	f, err := Detect(context.Background())
	if err != nil {
		t.Skipf("host without a default IPv4 route? %v", err)
	}
	if f.NodeName == "" || f.NodeIP == nil || f.MTU <= 0 {
		t.Errorf("facts incomplete: %+v", f)
	}
	if f.CgroupDriver != "cgroupfs" && f.CgroupDriver != "systemd" {
		t.Errorf("cgroup driver = %q", f.CgroupDriver)
	}
}

func TestParseRequirements(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []Requirement
		wantErr string
	}{
		{name: "packages with one and several files", text: "# comment\n\nrunc /usr/sbin/runc\ncni  /usr/lib/cni/bridge\t/usr/lib/cni/loopback\n",
			want: []Requirement{{"/usr/sbin/runc", "runc"}, {"/usr/lib/cni/bridge", "cni"}, {"/usr/lib/cni/loopback", "cni"}}},
		{name: "package without file", text: "runc /usr/sbin/runc\nsocat\n", wantErr: "line 2: package socat names no file"},
		{name: "relative path", text: "socat bin/socat\n", wantErr: `line 1: package socat: file "bin/socat" is not an absolute path`},
		{name: "nothing listed", text: "# only a comment\n", wantErr: "no packages listed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseRequirements(tt.text)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("parseRequirements: %v, want error %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("parseRequirements = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPackagesListedOnce: the cluster's packages come from packages.txt, which .ci/run
// installs from and docs/local-cluster.md points to, instead of lists of their own.
func TestPackagesListedOnce(t *testing.T) {
	const file = "test/cluster/host/packages.txt"
	pkgs := packageNames(Requirements)
	if !slices.Contains(pkgs, "runc") || !slices.Contains(pkgs, "containernetworking-plugins") {
		t.Errorf("Requirements name the packages %v; want runc and containernetworking-plugins among them", pkgs)
	}
	for _, tt := range []struct{ path, hint string }{
		{"../../../.ci/run", "install the packages of " + file},
		{"../../../docs/local-cluster.md", "point to " + file},
	} {
		t.Run(tt.path, func(t *testing.T) {
			b, err := os.ReadFile(tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), file) {
				t.Errorf("%s does not name %s: it should %s", tt.path, file, tt.hint)
			}
			// A package named next to another one is a second copy of the list.
			for _, line := range strings.Split(string(b), "\n") {
				if n := countWords(line, pkgs); n > 1 {
					t.Errorf("%s lists packages itself: %q", tt.path, line)
				}
			}
		})
	}
}

// countWords counts the distinct words of line, split at anything but letters, digits
// and '-', that are in words.
func countWords(line string, words []string) int {
	seen := map[string]bool{}
	for _, w := range strings.FieldsFunc(line, func(r rune) bool {
		return !(r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}) {
		if slices.Contains(words, w) {
			seen[w] = true
		}
	}
	return len(seen)
}

// packageNames returns the distinct packages of reqs in their order.
func packageNames(reqs []Requirement) []string {
	var pkgs []string
	for _, r := range reqs {
		if !slices.Contains(pkgs, r.Package) {
			pkgs = append(pkgs, r.Package)
		}
	}
	return pkgs
}

// installHint is an install command a make target or a tool prints when a package is
// missing, e.g. "apt-get install --no-install-recommends buildah".
var installHint = regexp.MustCompile(`apt-get install((?: -[-\w]+)*)((?: [a-z0-9][a-z0-9.+-]+)+)`)

// TestCIPackages: .ci/run installs CI's extra packages from .ci/packages.txt (the same
// format as the cluster's list, not a list of its own), and every package that a make
// target, script or test tool tells the user to install is in one of the two lists, so that
// a fresh machine running .ci/run has whatever a step asks for.
func TestCIPackages(t *testing.T) {
	const ciFile = ".ci/packages.txt"
	b, err := os.ReadFile("../../../" + ciFile)
	if err != nil {
		t.Fatal(err)
	}
	ciReqs, err := parseRequirements(string(b))
	if err != nil {
		t.Fatalf("%s: %v", ciFile, err)
	}
	ci := packageNames(ciReqs)
	listed := append(packageNames(Requirements), ci...)
	for _, p := range ci {
		if slices.Contains(packageNames(Requirements), p) {
			t.Errorf("%s lists %s, which test/cluster/host/packages.txt lists already", ciFile, p)
		}
	}
	run, err := os.ReadFile("../../../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(run), ciFile) {
		t.Errorf(".ci/run does not name %s: it should install the packages listed there", ciFile)
	}
	for _, line := range strings.Split(string(run), "\n") {
		if n := countWords(line, ci); n > 1 {
			t.Errorf(".ci/run lists packages itself: %q", line)
		}
	}

	var hints int
	err = filepath.WalkDir("../../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "_output" || name == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".mk" && ext != ".sh" && d.Name() != "Makefile" {
			return nil
		}
		text, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range installHint.FindAllStringSubmatch(string(text), -1) {
			if strings.Contains(m[0], "NAME") || strings.HasSuffix(path, "host_test.go") {
				continue
			}
			for _, pkg := range strings.Fields(m[2]) {
				hints++
				if !slices.Contains(listed, pkg) {
					t.Errorf("%s tells the user to install %s (%q), but neither %s nor test/cluster/host/packages.txt lists it: .ci/run on a fresh machine would not have it",
						strings.TrimPrefix(path, "../../../"), pkg, m[0], ciFile)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"buildah", "qemu-system-x86"} {
		if !slices.Contains(ci, want) {
			t.Errorf("%s does not list %s, which a CI step needs", ciFile, want)
		}
	}
	if hints == 0 {
		t.Error("no install hint found in the repository's make targets and tools; the pattern no longer matches them")
	}
}

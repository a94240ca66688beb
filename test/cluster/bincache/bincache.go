// Package bincache builds the local cluster's binaries from source into a cache directory
// and skips a build whose binaries exist and whose stamp matches the pinned versions:
//
//   - Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
//     kube-proxy, kubectl) from k8s.io/kubernetes in the test module, versions stamped; or,
//     for another Kubernetes version (the version matrix), from k8s.io/kubernetes at that
//     version in a throwaway module of its own (see buildKubernetesAt);
//   - etcd's server at the version Kubernetes pins, against etcd's own go.mod;
//   - containerd, containerd-shim-runc-v2 and ctr with `go install …@version`;
//   - the cluster's own helpers (pause, runc-oomclamp) from the test module, every time
//     (the Go build cache makes that cheap).
package bincache

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Component is one set of binaries built together.
type Component struct {
	Name     string
	Version  string
	Binaries []string
	// Dir is <cache>/<Name>-<Version>.
	Dir string
}

// Path of one of the component's binaries.
func (c Component) Path(bin string) string { return filepath.Join(c.Dir, bin) }

// Cache is the set of components under one directory.
type Cache struct {
	// Root is the cache directory, e.g. _output/cluster-cache.
	Root string
	// TestModule is the directory of the test/ Go module.
	TestModule string
	// Go is the go command.
	Go  string
	Log *slog.Logger

	Kubernetes, Etcd, Containerd, Helpers Component
	// kubeInTestModule is true when Kubernetes is the version the test module requires,
	// built inside the test module; false for another version of the version matrix.
	kubeInTestModule bool
}

// Kubernetes binaries built from k8s.io/kubernetes, by main package.
var kubePackages = map[string]string{
	"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
	"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
	"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
	"kubelet":                 "k8s.io/kubernetes/cmd/kubelet",
	"kube-proxy":              "k8s.io/kubernetes/cmd/kube-proxy",
	"kubectl":                 "k8s.io/kubernetes/cmd/kubectl",
}

const (
	etcdModule       = "go.etcd.io/etcd/server/v3"
	containerdModule = "github.com/containerd/containerd/v2"
)

// New resolves the versions: etcd from the test module's Kubernetes requirement,
// containerd as given, and Kubernetes from kubeVersion or, when that is empty, from the test
// module's requirement. etcd stays the one the test module's Kubernetes pins whatever
// kubeVersion is: every supported minor runs on it, and one etcd build serves the matrix.
func New(ctx context.Context, root, testModule, goCmd, containerdVersion, kubeVersion string, log *slog.Logger) (*Cache, error) {
	c := &Cache{Root: root, TestModule: testModule, Go: goCmd, Log: log}
	tv, err := c.moduleVersion(ctx, "k8s.io/kubernetes")
	if err != nil {
		return nil, err
	}
	ev, err := c.kubernetesPin(ctx, tv, etcdModule)
	if err != nil {
		return nil, err
	}
	kv := tv
	if kubeVersion != "" {
		if _, _, err := KubeMinor(kubeVersion); err != nil {
			return nil, err
		}
		kv = kubeVersion
	}
	c.kubeInTestModule = kv == tv
	kb := make([]string, 0, len(kubePackages))
	for b := range kubePackages {
		kb = append(kb, b)
	}
	c.Kubernetes = Component{Name: "kubernetes", Version: kv, Binaries: kb}
	c.Etcd = Component{Name: "etcd", Version: ev, Binaries: []string{"etcd"}}
	c.Containerd = Component{Name: "containerd", Version: containerdVersion, Binaries: []string{"containerd", "containerd-shim-runc-v2", "ctr"}}
	c.Helpers = Component{Name: "helpers", Version: "src", Binaries: []string{"pause", "runc-oomclamp"}}
	for _, comp := range []*Component{&c.Kubernetes, &c.Etcd, &c.Containerd, &c.Helpers} {
		comp.Dir = filepath.Join(root, comp.Name+"-"+comp.Version)
	}
	return c, nil
}

// moduleVersion reads the version of a required module from the test module's go.mod text;
// unlike `go list -m` it does not depend on the rest of go.mod being tidy.
func (c *Cache) moduleVersion(_ context.Context, mod string) (string, error) {
	return requiredVersion(filepath.Join(c.TestModule, "go.mod"), mod)
}

// kubernetesPin returns the version of mod that k8s.io/kubernetes@version requires in its
// own go.mod (etcd's server is one: the test module does not need it).
func (c *Cache) kubernetesPin(ctx context.Context, version, mod string) (string, error) {
	out, err := c.goOutput(ctx, c.Root, []string{"GOFLAGS="}, "mod", "download", "-json", "k8s.io/kubernetes@"+version)
	if err != nil {
		return "", err
	}
	var dl struct{ GoMod string }
	if err := json.Unmarshal([]byte(out), &dl); err != nil {
		return "", fmt.Errorf("parse go mod download output: %w", err)
	}
	return requiredVersion(dl.GoMod, mod)
}

// requiredVersion finds mod's version in the require lines of the go.mod at path.
func requiredVersion(path, mod string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == mod && strings.HasPrefix(f[1], "v") {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s does not require %s", path, mod)
}

// stamp records what a component directory was built from.
type stamp struct {
	Version   string `json:"version"`
	GoVersion string `json:"goVersion"`
	Built     string `json:"built"`
	Seconds   int    `json:"seconds"`
}

func (c *Cache) upToDate(comp Component) bool {
	data, err := os.ReadFile(filepath.Join(comp.Dir, ".stamp"))
	if err != nil {
		return false
	}
	var s stamp
	if json.Unmarshal(data, &s) != nil || s.Version != comp.Version || s.GoVersion != runtime.Version() {
		return false
	}
	for _, b := range comp.Binaries {
		if fi, err := os.Stat(comp.Path(b)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

func writeStamp(comp Component, took time.Duration) error {
	data, err := json.Marshal(stamp{Version: comp.Version, GoVersion: runtime.Version(),
		Built: time.Now().UTC().Format(time.RFC3339), Seconds: int(took.Seconds())})
	if err != nil {
		return fmt.Errorf("encode stamp: %w", err)
	}
	return os.WriteFile(filepath.Join(comp.Dir, ".stamp"), data, 0o644)
}

// EnsureAll builds whatever is missing or stale.
func (c *Cache) EnsureAll(ctx context.Context) error {
	steps := []struct {
		comp  Component
		build func(context.Context, Component) error
	}{
		{c.Helpers, c.buildHelpers},
		{c.Etcd, c.buildEtcd},
		{c.Containerd, c.buildContainerd},
		{c.Kubernetes, c.buildKubernetes},
	}
	for _, s := range steps {
		log := c.Log.With("component", s.comp.Name, "version", s.comp.Version)
		if s.comp.Name != "helpers" && c.upToDate(s.comp) {
			log.Info("cached", "dir", s.comp.Dir)
			continue
		}
		if err := os.MkdirAll(s.comp.Dir, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", s.comp.Dir, err)
		}
		log.Info("building", "dir", s.comp.Dir)
		start := time.Now()
		if err := s.build(ctx, s.comp); err != nil {
			return fmt.Errorf("build %s %s: %w", s.comp.Name, s.comp.Version, err)
		}
		took := time.Since(start)
		if err := writeStamp(s.comp, took); err != nil {
			return err
		}
		log.Info("built", "took", took.Round(time.Second).String())
	}
	return nil
}

// kubeLDFlags stamps the version into component-base (servers) and client-go (kubectl's
// client side) the way Kubernetes' own build does.
func kubeLDFlags(version string) (string, error) {
	m := regexp.MustCompile(`^v(\d+)\.(\d+)\.`).FindStringSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("kubernetes version %q is not vMAJOR.MINOR.PATCH", version)
	}
	vars := map[string]string{
		"gitVersion": version, "gitMajor": m[1], "gitMinor": m[2], "gitTreeState": "clean",
		"buildDate": time.Now().UTC().Format("2006-01-02T15:04:05Z"),
	}
	flags := []string{"-s", "-w"}
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		for _, k := range []string{"gitVersion", "gitMajor", "gitMinor", "gitTreeState", "buildDate"} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, k, vars[k]))
		}
	}
	return strings.Join(flags, " "), nil
}

func (c *Cache) buildKubernetes(ctx context.Context, comp Component) error {
	ld, err := kubeLDFlags(comp.Version)
	if err != nil {
		return err
	}
	args := []string{"build", "-ldflags", ld, "-o", absPath(comp.Dir) + "/"}
	for _, b := range comp.Binaries {
		args = append(args, kubePackages[b])
	}
	if c.kubeInTestModule {
		_, err = c.goOutput(ctx, c.TestModule, nil, args...)
		return err
	}
	src, err := c.kubernetesModule(ctx, comp.Version)
	if err != nil {
		return err
	}
	_, err = c.goOutput(ctx, src, []string{"GOFLAGS=-mod=mod"}, args...)
	return err
}

// kubernetesModule writes a throwaway module that requires k8s.io/kubernetes at version,
// for building a Kubernetes other than the test module's. k8s.io/kubernetes replaces its
// staging modules (k8s.io/api, k8s.io/client-go, ...) with directories of its own
// repository, which a module that requires it cannot see; the published staging modules
// carry the same code at v0.MINOR.PATCH, so every such replace becomes one to that version.
// go.sum starts as k8s.io/kubernetes's own and the go command adds the staging modules'.
func (c *Cache) kubernetesModule(ctx context.Context, version string) (string, error) {
	out, err := c.goOutput(ctx, c.Root, []string{"GOFLAGS="}, "mod", "download", "-json", "k8s.io/kubernetes@"+version)
	if err != nil {
		return "", err
	}
	var dl struct{ Dir, GoMod string }
	if err := json.Unmarshal([]byte(out), &dl); err != nil {
		return "", fmt.Errorf("parse go mod download output: %w", err)
	}
	kubeMod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return "", fmt.Errorf("read k8s.io/kubernetes go.mod: %w", err)
	}
	gomod, err := kubernetesBuildGoMod(string(kubeMod), version)
	if err != nil {
		return "", err
	}
	src := filepath.Join(c.Root, "src", "kubernetes-"+version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", src, err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return "", fmt.Errorf("write kubernetes build go.mod: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(dl.Dir, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read k8s.io/kubernetes go.sum: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644); err != nil {
		return "", fmt.Errorf("write kubernetes build go.sum: %w", err)
	}
	return src, nil
}

// kubernetesBuildGoMod returns the go.mod of the module that builds k8s.io/kubernetes at
// version, given k8s.io/kubernetes's own go.mod: its go and godebug lines (the main
// module's decide the binaries' GODEBUG defaults), a requirement of k8s.io/kubernetes, and
// each of its replaces of a staging module by a directory turned into a replace by that
// module at v0.MINOR.PATCH. Other replaces are kept as they are.
func kubernetesBuildGoMod(kubeGoMod, version string) (string, error) {
	minor, patch, err := KubeMinor(version)
	if err != nil {
		return "", err
	}
	staging := fmt.Sprintf("v0.%d.%d", minor, patch)
	var goLine string
	var godebug, replaces []string
	block := "" // the directive of the block being read: "replace", "godebug" or another
	for _, line := range strings.Split(kubeGoMod, "\n") {
		t := strings.TrimSpace(line)
		if i := strings.Index(t, "//"); i >= 0 {
			t = strings.TrimSpace(t[:i])
		}
		if t == "" {
			continue
		}
		if block != "" {
			switch {
			case t == ")":
				block = ""
			case block == "godebug":
				godebug = append(godebug, t)
			case block == "replace":
				r, err := stagingReplace(t, staging)
				if err != nil {
					return "", fmt.Errorf("k8s.io/kubernetes %s: %w", version, err)
				}
				replaces = append(replaces, r)
			}
			continue
		}
		directive, rest, _ := strings.Cut(t, " ")
		rest = strings.TrimSpace(rest)
		switch {
		case rest == "(":
			block = directive
		case directive == "go" && goLine == "":
			goLine = t
		case directive == "godebug":
			godebug = append(godebug, rest)
		case directive == "replace":
			r, err := stagingReplace(rest, staging)
			if err != nil {
				return "", fmt.Errorf("k8s.io/kubernetes %s: %w", version, err)
			}
			replaces = append(replaces, r)
		}
	}
	if goLine == "" {
		return "", fmt.Errorf("k8s.io/kubernetes %s: go.mod has no go line", version)
	}
	if len(replaces) == 0 {
		return "", fmt.Errorf("k8s.io/kubernetes %s: go.mod replaces no staging module", version)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "module localcluster.invalid/kubebuild\n\n%s\n", goLine)
	for _, g := range godebug {
		fmt.Fprintf(&b, "\ngodebug %s\n", g)
	}
	fmt.Fprintf(&b, "\nrequire k8s.io/kubernetes %s\n\nreplace (\n", version)
	for _, r := range replaces {
		fmt.Fprintf(&b, "\t%s\n", r)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

// stagingReplace rewrites one replace ("from => to") whose target is a staging directory
// of the Kubernetes repository into a replace by the published module at the staging version.
func stagingReplace(r, staging string) (string, error) {
	from, to, ok := strings.Cut(r, "=>")
	if !ok {
		return "", fmt.Errorf("replace %q has no =>", r)
	}
	from, to = strings.TrimSpace(from), strings.TrimSpace(to)
	if strings.HasPrefix(to, "./staging/") {
		to = strings.Fields(from)[0] + " " + staging
	}
	return from + " => " + to, nil
}

// KubeMinor returns the minor and patch numbers of a Kubernetes version v1.MINOR.PATCH.
func KubeMinor(version string) (minor, patch int, err error) {
	m := regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`).FindStringSubmatch(version)
	if m == nil {
		return 0, 0, fmt.Errorf("kubernetes version %q is not v1.MINOR.PATCH (a release, e.g. v1.34.4)", version)
	}
	minor, _ = strconv.Atoi(m[1])
	patch, _ = strconv.Atoi(m[2])
	return minor, patch, nil
}

func (c *Cache) buildHelpers(ctx context.Context, comp Component) error {
	_, err := c.goOutput(ctx, c.TestModule, []string{"CGO_ENABLED=0"}, "build", "-ldflags", "-s -w",
		"-o", comp.Dir+"/", "./cluster/cmd/pause", "./cluster/cmd/runc-oomclamp")
	return err
}

func (c *Cache) buildContainerd(ctx context.Context, comp Component) error {
	ld := fmt.Sprintf("-s -w -X %s/version.Version=%s -X %s/version.Package=%s", containerdModule, comp.Version, containerdModule, containerdModule)
	args := []string{"install", "-ldflags", ld}
	for _, b := range comp.Binaries {
		args = append(args, fmt.Sprintf("%s/cmd/%s@%s", containerdModule, b, comp.Version))
	}
	_, err := c.goOutput(ctx, c.Root, []string{"CGO_ENABLED=0", "GOBIN=" + absPath(comp.Dir), "GOFLAGS="}, args...)
	return err
}

// buildEtcd builds etcd's server main against etcd's own requirements. `go install …@v`
// refuses etcd's server module because its go.mod has replace directives (to sibling
// modules of the same release), so a throwaway module gets etcd's go.mod and go.sum without
// the replace block and requires the server module itself at the pinned version.
func (c *Cache) buildEtcd(ctx context.Context, comp Component) error {
	out, err := c.goOutput(ctx, c.Root, []string{"GOFLAGS="}, "mod", "download", "-json", etcdModule+"@"+comp.Version)
	if err != nil {
		return err
	}
	var dl struct{ Dir, GoMod string }
	if err := json.Unmarshal([]byte(out), &dl); err != nil {
		return fmt.Errorf("parse go mod download output: %w", err)
	}
	src := filepath.Join(c.Root, "src", "etcd-"+comp.Version)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", src, err)
	}
	gomod, err := withoutReplace(dl.GoMod)
	if err != nil {
		return err
	}
	gomod = "module localcluster.invalid/etcdbuild\n" + gomod + fmt.Sprintf("\nrequire %s %s\n", etcdModule, comp.Version)
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
		return fmt.Errorf("write etcd build go.mod: %w", err)
	}
	sum, err := os.ReadFile(filepath.Join(dl.Dir, "go.sum"))
	if err != nil {
		return fmt.Errorf("read etcd go.sum: %w", err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.sum"), sum, 0o644); err != nil {
		return fmt.Errorf("write etcd build go.sum: %w", err)
	}
	_, err = c.goOutput(ctx, src, []string{"CGO_ENABLED=0", "GOFLAGS=-mod=mod"}, "build", "-ldflags", "-s -w",
		"-o", filepath.Join(absPath(comp.Dir), "etcd"), etcdModule)
	return err
}

// withoutReplace returns the go.mod at path without its module line and replace directives.
func withoutReplace(path string) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", path, err)
	}
	defer fh.Close()
	var b strings.Builder
	inBlock := false
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		line := sc.Text()
		t := strings.TrimSpace(line)
		switch {
		case inBlock:
			inBlock = t != ")"
		case strings.HasPrefix(t, "replace ("):
			inBlock = true
		case strings.HasPrefix(t, "replace "), strings.HasPrefix(t, "module "):
		default:
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return b.String(), nil
}

// goOutput runs the go command in dir and returns its standard output; standard error is
// part of the returned error.
func (c *Cache) goOutput(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, c.Go, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func absPath(p string) string {
	a, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return a
}

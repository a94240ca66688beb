package schedperf

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// The module which upstreampatch/dra-scheduler-caches.patch changes, and the version
// of it that the patch is written against.
const (
	PatchedModule  = "k8s.io/dynamic-resource-allocation"
	PatchedVersion = "v0.37.1"
)

// schedulerCachesPatch caches, in the scheduler's DRA allocator, what it otherwise
// recomputes for every node and pod: the conversion of each ResourceSlice, the CEL
// representation of each device's attributes, the index of the slices by node; and
// it indexes the cluster's shared allocations by device once per pod, which the
// allocator otherwise searches one by one for every device whose counters or
// capacity it checks. A unified diff relative to the module's root (patch -p1).
//
//go:embed upstreampatch/dra-scheduler-caches.patch
var schedulerCachesPatch []byte

// PatchedModfile writes, into outDir, a copy of PatchedModule with the scheduler
// caches patch applied (outDir/dynamic-resource-allocation, replaced if present) and a
// go.mod and go.sum for the test module at testModule that use the copy. It returns
// that go.mod's path, for `go test -modfile=<path>` run in testModule: the benchmark
// then measures the scheduler with the caches, and nothing in testModule changes.
func PatchedModfile(ctx context.Context, testModule, outDir string) (string, error) {
	logger := klog.FromContext(ctx)
	version, src, err := requiredModule(ctx, testModule, PatchedModule)
	if err != nil {
		return "", err
	}
	if err := checkPatchedVersion(version); err != nil {
		return "", fmt.Errorf("test module %s: %w", testModule, err)
	}

	outDir, err = filepath.Abs(outDir)
	if err != nil {
		return "", fmt.Errorf("patched module output directory: %w", err)
	}
	dst := filepath.Join(outDir, "dynamic-resource-allocation")
	if err := os.RemoveAll(dst); err != nil {
		return "", fmt.Errorf("remove the previous patched copy: %w", err)
	}
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return "", fmt.Errorf("patched module output directory: %w", err)
	}
	// CopyFS creates writable files whatever the module cache's read-only modes.
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		return "", fmt.Errorf("copy %s %s from %s: %w", PatchedModule, version, src, err)
	}

	cmd := exec.CommandContext(ctx, "patch", "-p1", "--batch", "--forward")
	cmd.Dir = dst
	cmd.Stdin = bytes.NewReader(schedulerCachesPatch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("apply upstreampatch/dra-scheduler-caches.patch in %s: %w\n%s", dst, err, out)
	}

	modfile := filepath.Join(outDir, "go.mod")
	if err := copyFile(filepath.Join(testModule, "go.mod"), modfile); err != nil {
		return "", err
	}
	if err := copyFile(filepath.Join(testModule, "go.sum"), filepath.Join(outDir, "go.sum")); err != nil {
		return "", err
	}
	// -replace overrides the test module's own replacement of the module (its pin to
	// the release), so that the modfile has exactly one.
	cmd = exec.CommandContext(ctx, controlplane.GoCommand(), "mod", "edit", "-replace="+PatchedModule+"="+dst, modfile)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("replace %s in %s: %w\n%s", PatchedModule, modfile, err, out)
	}
	logger.V(2).Info("Patched module for the benchmark", "module", PatchedModule, "version", version, "copy", dst, "modfile", modfile)
	return modfile, nil
}

// requiredModule returns the version of module that the test module builds with (its
// replacement's, if it has one) and the directory of that version's source.
func requiredModule(ctx context.Context, testModule, module string) (version, dir string, err error) {
	cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "list", "-m", "-f",
		"{{if .Replace}}{{.Replace.Version}}{{else}}{{.Version}}{{end}}\t{{.Dir}}", module)
	cmd.Dir = testModule
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("find %s (go list -m in %s): %w\n%s", module, testModule, err, stderr.Bytes())
	}
	version, dir, _ = strings.Cut(strings.TrimSpace(string(out)), "\t")
	if dir == "" {
		return "", "", fmt.Errorf("%s %s is not in the module cache; run `go mod download %s` in %s", module, version, module, testModule)
	}
	return version, dir, nil
}

// checkPatchedVersion fails unless the test module builds with the version of
// PatchedModule that the patch is written against.
func checkPatchedVersion(version string) error {
	if version == PatchedVersion {
		return nil
	}
	if version == "" {
		version = "a local replacement"
	}
	return fmt.Errorf("it builds with %s %s but upstreampatch/dra-scheduler-caches.patch is written against %s: port the patch to %s",
		PatchedModule, version, PatchedVersion, version)
}

func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read %s: %w", src, err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

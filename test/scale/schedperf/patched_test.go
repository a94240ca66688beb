package schedperf

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

func TestPatchedModfile(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	testModule, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	copyDir := filepath.Join(outDir, "dynamic-resource-allocation")

	// Twice into the same directory: the second run starts from a fresh copy, which
	// the patch (--forward) would otherwise refuse as already applied.
	var modfile string
	for range 2 {
		modfile, err = PatchedModfile(ctx, testModule, outDir)
		if err != nil {
			t.Fatalf("PatchedModfile: %v", err)
		}
	}
	if want := filepath.Join(outDir, "go.mod"); modfile != want {
		t.Errorf("modfile %s, want %s", modfile, want)
	}

	// Markers of the patch in the copy.
	for _, m := range []struct{ file, marker string }{
		{"structured/internal/incubating/slicecache_incubating.go", "var lastSliceIndex sliceIndexCache"},
		{"cel/compile.go", "func PrepareAttributes("},
		{"structured/internal/incubating/allocator_incubating.go", "lastSliceIndex.get(slices)"},
		{"structured/internal/incubating/allocatedstate_incubating.go", "func (a *Allocator) hasSharedAllocation("},
		{"structured/internal/incubating/allocator_incubating.go", "if !alloc.isDeviceAllocated(deviceID) {"},
	} {
		data, err := os.ReadFile(filepath.Join(copyDir, m.file))
		if err != nil {
			t.Errorf("patched copy: %v", err)
			continue
		}
		if !bytes.Contains(data, []byte(m.marker)) {
			t.Errorf("patched copy: %s lacks %q", m.file, m.marker)
		}
	}

	// Exactly one replacement of the module, by the copy.
	out, err := exec.CommandContext(ctx, controlplane.GoCommand(), "mod", "edit", "-json", modfile).Output()
	if err != nil {
		t.Fatalf("go mod edit -json %s: %v", modfile, err)
	}
	var mod struct {
		Replace []struct {
			Old, New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		t.Fatalf("go mod edit -json: %v", err)
	}
	var replaced []string
	for _, r := range mod.Replace {
		if r.Old.Path == PatchedModule {
			replaced = append(replaced, r.New.Path+" "+r.New.Version)
		}
	}
	if want := []string{copyDir + " "}; strings.Join(replaced, ",") != strings.Join(want, ",") {
		t.Errorf("replacements of %s: %q, want %q", PatchedModule, replaced, want)
	}

	// The test module resolves the module to the copy with this modfile.
	cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "list", "-modfile="+modfile, "-m", "-f", "{{.Dir}}", PatchedModule)
	cmd.Dir = testModule
	out, err = cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -modfile: %v\n%s", err, out)
	}
	if dir := strings.TrimSpace(string(out)); dir != copyDir {
		t.Errorf("with the modfile %s is in %s, want %s", PatchedModule, dir, copyDir)
	}

	sum, err := os.ReadFile(filepath.Join(outDir, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(filepath.Join(testModule, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sum, want) {
		t.Errorf("go.sum beside the modfile differs from the test module's")
	}
}

func TestPatchedVersion(t *testing.T) {
	for _, tc := range []struct {
		version string
		wantErr string
	}{
		{version: PatchedVersion},
		{version: "v0.38.0", wantErr: "it builds with k8s.io/dynamic-resource-allocation v0.38.0 but upstreampatch/dra-scheduler-caches.patch is written against v0.37.1: port the patch to v0.38.0"},
		{version: "v0.37.1-rc.0", wantErr: "it builds with k8s.io/dynamic-resource-allocation v0.37.1-rc.0 but upstreampatch/dra-scheduler-caches.patch is written against v0.37.1"},
		{version: "", wantErr: "it builds with k8s.io/dynamic-resource-allocation a local replacement but upstreampatch/dra-scheduler-caches.patch is written against v0.37.1"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			err := checkPatchedVersion(tc.version)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one starting with %q", err, tc.wantErr)
			}
		})
	}
}

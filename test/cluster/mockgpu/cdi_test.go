package mockgpu

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	oci "github.com/opencontainers/runtime-spec/specs-go"
	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"
)

const claimUID = "0f4c6b1e-9a3d-4e55-8c1a-2b7d9e0f1a2b"

// The spec is checked the way the container runtime uses it: loaded from the directory
// by the CDI library, its devices injected into an OCI spec.
func TestSpecsWrite(t *testing.T) {
	gpus := fixtureGPUs()
	tests := []struct {
		name    string
		gpus    []GPU
		wantIDs []string
		wantEnv []string
	}{{
		name: "two GPUs in allocation order",
		gpus: []GPU{gpus[1], gpus[0]},
		wantIDs: []string{
			"gpu.mock.rdma.dra.io/gpu=" + claimUID + "-gpu-1",
			"gpu.mock.rdma.dra.io/gpu=" + claimUID + "-gpu-0",
		},
		wantEnv: []string{
			"MOCK_GPU_BUS_IDS=0000:9a:00.0,0000:1b:00.0",
			"MOCK_GPU_BUS_ID_0=0000:1b:00.0",
			"MOCK_GPU_BUS_ID_1=0000:9a:00.0",
			"MOCK_GPU_ROOTS=pci0000:97,pci0000:18",
		},
	}, {
		name:    "one GPU",
		gpus:    []GPU{gpus[2]},
		wantIDs: []string{"gpu.mock.rdma.dra.io/gpu=" + claimUID + "-gpu-2"},
		wantEnv: []string{
			"MOCK_GPU_BUS_IDS=0001:c0:00.0",
			"MOCK_GPU_BUS_ID_2=0001:c0:00.0",
			"MOCK_GPU_ROOTS=pci0001:c0",
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ids, err := Specs{Dir: dir}.Write(claimUID, tt.gpus)
			if err != nil {
				t.Fatalf("Write() error = %v", err)
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("CDI device IDs mismatch (-want +got):\n%s", diff)
			}
			path := filepath.Join(dir, "gpu.mock.rdma.dra.io-gpu_"+claimUID+".json")
			if fi, err := os.Stat(path); err != nil {
				t.Fatalf("spec file: %v", err)
			} else if fi.Mode().Perm() != 0o644 {
				t.Errorf("spec file mode = %v, want 0644", fi.Mode().Perm())
			}
			if matches, _ := filepath.Glob(SpecGlob(dir)); !slices.Equal(matches, []string{path}) {
				t.Errorf("SpecGlob matches %v, want [%s]", matches, path)
			}
			if got := injectedEnv(t, dir, ids); !cmp.Equal(tt.wantEnv, got) {
				t.Errorf("environment of a container with the devices mismatch (-want +got):\n%s", cmp.Diff(tt.wantEnv, got))
			}
		})
	}
}

// injectedEnv returns the sorted environment that the CDI library's cache, reading dir,
// gives a container that asks for ids.
func injectedEnv(t *testing.T, dir string, ids []string) []string {
	t.Helper()
	cache, err := cdiapi.NewCache(cdiapi.WithSpecDirs(dir), cdiapi.WithAutoRefresh(false))
	if err != nil {
		t.Fatalf("load CDI specs: %v", err)
	}
	if errs := cache.GetErrors(); len(errs) > 0 {
		t.Fatalf("CDI spec errors: %v", errs)
	}
	spec := &oci.Spec{Process: &oci.Process{}}
	if unresolved, err := cache.InjectDevices(spec, ids...); err != nil {
		t.Fatalf("inject %v: %v (unresolved %v)", ids, err, unresolved)
	}
	env := slices.Clone(spec.Process.Env)
	slices.Sort(env)
	return env
}

func TestBuildSpecErrors(t *testing.T) {
	tests := []struct {
		name     string
		claimUID string
		gpus     []GPU
		wantErr  string
	}{
		{name: "no GPUs", claimUID: claimUID, wantErr: "claim has no GPUs"},
		{name: "UID not fit for a device name", claimUID: "a b", gpus: fixtureGPUs()[:1], wantErr: `CDI device name of claim "a b"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := BuildSpec(tt.claimUID, tt.gpus)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("BuildSpec() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestSpecsRemove(t *testing.T) {
	dir := t.TempDir()
	specs := Specs{Dir: dir}
	if _, err := specs.Write(claimUID, fixtureGPUs()[:1]); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{"written", "already gone"} {
		if err := specs.Remove(claimUID); err != nil {
			t.Fatalf("Remove() of a claim whose spec is %s: %v", step, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Fatalf("after Remove() of a claim whose spec is %s, %s holds %v", step, dir, entries)
		}
	}
}

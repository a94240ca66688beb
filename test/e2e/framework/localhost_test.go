package framework

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// TestLocalHostWriteFile: a write through a symbolic link replaces the file it resolves
// to (as a port's state file under class/infiniband), a new file is created, and no
// temporary file stays behind.
func TestLocalHostWriteFile(t *testing.T) {
	root := t.TempDir()
	devices := filepath.Join(root, "devices", "mlx5_6", "ports", "1")
	if err := os.MkdirAll(devices, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(devices, "state"), []byte(PortActive+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	class := filepath.Join(root, "class")
	if err := os.MkdirAll(class, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(root, "devices", "mlx5_6"), filepath.Join(class, "mlx5_6")); err != nil {
		t.Fatal(err)
	}
	h := newLocalHost(root, map[string]string{})
	tests := []struct {
		name, path, read string
	}{
		{"existing file through a link", filepath.Join(class, "mlx5_6", "ports", "1", "state"), filepath.Join(devices, "state")},
		{"new file through a link", filepath.Join(class, "mlx5_6", "hold"), filepath.Join(root, "devices", "mlx5_6", "hold")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := h.WriteFile(tc.path, []byte(PortDown+"\n")); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(tc.read); err != nil || string(got) != PortDown+"\n" {
				t.Errorf("%s holds %q (%v), want %q", tc.read, got, err, PortDown+"\n")
			}
			if st, err := h.Lstat(tc.read); err != nil || !st.Mode().IsRegular() {
				t.Errorf("%s: %v (%v), want a regular file", tc.read, st, err)
			}
			entries, err := os.ReadDir(filepath.Dir(tc.read))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if atomicfile.IsTemp(filepath.Base(tc.read), e.Name()) {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
	if err := h.WriteFile(filepath.Join(root, "missing", "file"), nil); err == nil {
		t.Error("a write into a missing directory succeeded")
	}
}

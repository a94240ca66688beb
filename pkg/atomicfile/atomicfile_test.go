package atomicfile

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteFile(t *testing.T) {
	tests := []struct {
		name     string
		existing string // content of the file before, "" for none
		perm     os.FileMode
	}{
		{name: "new file", perm: 0o644},
		{name: "replaces a file", existing: "old content that is longer than the new", perm: 0o644},
		{name: "private mode", existing: "old", perm: 0o600},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "metadata.json")
			if tt.existing != "" {
				if err := os.WriteFile(path, []byte(tt.existing), 0o666); err != nil {
					t.Fatal(err)
				}
			}
			if err := WriteFile(path, []byte("new"), tt.perm); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if err != nil || string(got) != "new" {
				t.Errorf("content %q (%v), want %q", got, err, "new")
			}
			st, err := os.Stat(path)
			if err != nil || st.Mode().Perm() != tt.perm {
				t.Errorf("mode %v (%v), want %v", st.Mode().Perm(), err, tt.perm)
			}
			assertOnly(t, dir, "metadata.json")
		})
	}
}

// TestWriteFileFailureLeavesTheOldFile writes over a directory, which the rename refuses:
// the error names the path, and neither the old entry nor a temporary file is left
// changed or behind.
func TestWriteFileFailureLeavesTheOldFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "taken")
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(path, []byte("new"), 0o644)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %v, want one naming %s", err, path)
	}
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		t.Errorf("%s changed: %v %v", path, st, err)
	}
	assertOnly(t, dir, "taken")

	missing := filepath.Join(dir, "no-such-dir", "f")
	if err := WriteFile(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %v, want one naming %s", err, missing)
	}
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("directory holds %v, want %v", got, names)
	}
}

package atomicfile

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestWriteFileKeepsOpenReaders: a reader that opened the old file before the write
// reads the old content whole after it, and the old file is gone from the directory (the
// guarantee of a rename, which the exchange keeps). A symlink at the name is replaced
// itself, its target left alone, as a rename does.
func TestWriteFileKeepsOpenReaders(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	if err := os.WriteFile(path, []byte("old content"), 0o600); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for i := range 3 {
		if err := WriteFile(path, []byte(fmt.Sprintf("new content %d", i)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old, err := io.ReadAll(reader)
	if err != nil || string(old) != "old content" {
		t.Errorf("reader of the old file read %q (%v), want %q", old, err, "old content")
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(reader.Fd()), &st); err != nil || st.Nlink != 0 {
		t.Errorf("old file has %d links (%v), want 0: it should be unlinked", st.Nlink, err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "new content 2" {
		t.Errorf("content %q (%v), want %q", got, err, "new content 2")
	}
	assertOnly(t, dir, "checkpoint.json")

	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("target"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("target", link); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(link, []byte("new"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Lstat(link); err != nil || !st.Mode().IsRegular() {
		t.Errorf("%s is %v (%v), want a regular file", link, st, err)
	}
	if got, err := os.ReadFile(target); err != nil || string(got) != "target" {
		t.Errorf("symlink target holds %q (%v), want it unchanged", got, err)
	}
	assertOnly(t, dir, "checkpoint.json", "link", "target")
}

// BenchmarkWriteFile replaces a file of a checkpoint's size in a directory of the test's
// temporary dir (TMPDIR decides the file system: run it on a disk to see the cost of
// the replace).
func BenchmarkWriteFile(b *testing.B) {
	path := filepath.Join(b.TempDir(), "checkpoint.json")
	data := make([]byte, 3000)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := WriteFile(path, data, 0o600); err != nil {
			b.Fatal(err)
		}
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

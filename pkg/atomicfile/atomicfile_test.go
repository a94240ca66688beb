package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
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

// TestWriteOptions writes over an old file with each option and way of writing: the new
// content and mode are in place and nothing else is left in the directory.
func TestWriteOptions(t *testing.T) {
	tests := []struct {
		name  string
		perm  os.FileMode
		write func(path string, perm os.FileMode) error
		// checked, when set, is what the check must have seen of the temporary file.
		checked string
	}{
		{
			name:  "sync",
			perm:  0o755,
			write: func(path string, perm os.FileMode) error { return WriteFile(path, []byte("new"), perm, Sync()) },
		},
		{
			name: "check sees the whole temporary file with its mode",
			perm: 0o644,
			write: func(path string, perm os.FileMode) error {
				return WriteFile(path, []byte("new"), perm, Check(func(tmp string) error {
					if !IsTemp(filepath.Base(path), filepath.Base(tmp)) || filepath.Dir(tmp) != filepath.Dir(path) {
						return fmt.Errorf("check got %s, not a temporary file of %s", tmp, path)
					}
					data, err := os.ReadFile(tmp)
					if err != nil {
						return err
					}
					st, err := os.Stat(tmp)
					if err != nil {
						return err
					}
					if string(data) != "new" || st.Mode().Perm() != perm {
						return fmt.Errorf("check saw %q mode %v, want %q mode %v", data, st.Mode().Perm(), "new", perm)
					}
					return nil
				}))
			},
		},
		{
			name: "streamed in pieces",
			perm: 0o644,
			write: func(path string, perm os.FileMode) error {
				return Write(path, perm, func(w io.Writer) error {
					for _, piece := range []string{"n", "e", "w"} {
						if _, err := io.Copy(w, strings.NewReader(piece)); err != nil {
							return err
						}
					}
					return nil
				})
			},
		},
		{
			name: "streamed, synced and checked",
			perm: 0o600,
			write: func(path string, perm os.FileMode) error {
				return Write(path, perm, func(w io.Writer) error {
					_, err := io.WriteString(w, "new")
					return err
				}, Sync(), Check(func(string) error { return nil }))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "file")
			if err := os.WriteFile(path, []byte("old content"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := tt.write(path, tt.perm); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(path); err != nil || string(got) != "new" {
				t.Errorf("content %q (%v), want %q", got, err, "new")
			}
			if st, err := os.Stat(path); err != nil || st.Mode().Perm() != tt.perm {
				t.Errorf("mode %v (%v), want %v", st.Mode().Perm(), err, tt.perm)
			}
			assertOnly(t, dir, "file")
		})
	}
}

// TestWriteFailureLeavesTheTarget makes each step of a write fail: the error names the
// path (or is the check's own), and the old entry is left as it was, no temporary file
// behind.
func TestWriteFailureLeavesTheTarget(t *testing.T) {
	errCheck := errors.New("spec refused")
	errWrite := errors.New("encoder failed")
	tests := []struct {
		name string
		// dirTarget makes the target a directory, which the rename refuses.
		dirTarget bool
		write     func(path string) error
		// want is the error to find with errors.Is; nil for any error naming the path.
		want error
	}{
		{
			name:      "rename refused",
			dirTarget: true,
			write:     func(path string) error { return WriteFile(path, []byte("new"), 0o644) },
		},
		{
			name:      "rename refused after sync",
			dirTarget: true,
			write:     func(path string) error { return WriteFile(path, []byte("new"), 0o644, Sync()) },
		},
		{
			name: "check fails",
			write: func(path string) error {
				return WriteFile(path, []byte("new"), 0o644, Check(func(string) error { return errCheck }))
			},
			want: errCheck,
		},
		{
			name: "write fails half way",
			write: func(path string) error {
				return Write(path, 0o644, func(w io.Writer) error {
					if _, err := io.WriteString(w, "half of the new"); err != nil {
						return err
					}
					return errWrite
				}, Sync())
			},
			want: errWrite,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "target")
			var err error
			if tt.dirTarget {
				err = os.Mkdir(path, 0o755)
			} else {
				err = os.WriteFile(path, []byte("old"), 0o600)
			}
			if err != nil {
				t.Fatal(err)
			}
			err = tt.write(path)
			switch {
			case err == nil:
				t.Fatal("the write succeeded")
			case tt.want == errCheck && err != errCheck: //nolint:errorlint // the check's error comes back unchanged, not wrapped
				t.Errorf("error %v, want the check's own error", err)
			case tt.want != nil && !errors.Is(err, tt.want):
				t.Errorf("error %v, want one wrapping %v", err, tt.want)
			case tt.want != errCheck && !strings.Contains(err.Error(), path): //nolint:errorlint // which table row, not which error
				t.Errorf("error %v, want one naming %s", err, path)
			}
			if tt.dirTarget {
				if st, err := os.Stat(path); err != nil || !st.IsDir() {
					t.Errorf("%s changed: %v %v", path, st, err)
				}
			} else if got, err := os.ReadFile(path); err != nil || string(got) != "old" {
				t.Errorf("%s holds %q (%v), want it unchanged", path, got, err)
			}
			assertOnly(t, dir, "target")
		})
	}

	missing := filepath.Join(t.TempDir(), "no-such-dir", "f")
	if err := WriteFile(missing, nil, 0o644); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("error %v, want one naming %s", err, missing)
	}
}

func TestIsTemp(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{TempPrefix("checkpoint.json") + "123.tmp", true},
		{".checkpoint.json.456.tmp", true},
		{"checkpoint.json", false},
		{"checkpoint.json.123.tmp", false},  // not hidden: not ours
		{".checkpoint.json.123", false},     // no suffix
		{".other.json.123.tmp", false},      // another file's
		{".checkpoint.json.corrupt", false}, // not a temporary file
	}
	for _, tt := range tests {
		if got := IsTemp("checkpoint.json", tt.name); got != tt.want {
			t.Errorf("IsTemp(checkpoint.json, %q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	// The names the writes make.
	dir := t.TempDir()
	f, err := openTemp(dir, "x.json", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.close(); err != nil {
		t.Fatal(err)
	}
	if !IsTemp("x.json", filepath.Base(f.name)) || filepath.Dir(f.name) != dir {
		t.Errorf("IsTemp does not know %s", f.name)
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

// TestSpare writes a file again and again with Spare: each write leaves the whole new
// content and the mode under the name, the replaced file stays as the spare, and from the
// second write on no write makes a file of its own (the two files keep their inodes).
func TestSpare(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "checkpoint.json")
	spare := filepath.Join(dir, "checkpoint.spare")
	var inodes []uint64
	writes := []struct {
		content string
		perm    os.FileMode
	}{
		{"first, and long", 0o600},
		{"second", 0o600},
		{"third, longer than the second", 0o640},
		{"4", 0o600},
		{"fifth", 0o600},
	}
	for i, w := range writes {
		if err := WriteFile(path, []byte(w.content), w.perm, Spare(spare)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(path); err != nil || string(got) != w.content {
			t.Errorf("write %d: content %q (%v), want %q", i, got, err, w.content)
		}
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != w.perm {
			t.Errorf("write %d: mode %v (%v), want %v", i, st.Mode().Perm(), err, w.perm)
		}
		if i == 0 {
			// Nothing to exchange with: the first write renames its file into place.
			assertOnly(t, dir, "checkpoint.json")
			continue
		}
		assertOnly(t, dir, "checkpoint.json", "checkpoint.spare")
		pair := []uint64{inode(t, path), inode(t, spare)}
		slices.Sort(pair)
		if inodes == nil {
			inodes = pair
		} else if !slices.Equal(pair, inodes) {
			t.Errorf("write %d: the file and the spare are inodes %v, want the %v of the second write", i, pair, inodes)
		}
	}

	// A write that fails leaves the name as it was, and no temporary file.
	errWrite := errors.New("encoder failed")
	err := Write(path, 0o600, func(w io.Writer) error {
		_, _ = io.WriteString(w, "half")
		return errWrite
	}, Spare(spare))
	if !errors.Is(err, errWrite) {
		t.Errorf("error %v, want %v", err, errWrite)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "fifth" {
		t.Errorf("content %q (%v) after a failed write, want %q", got, err, "fifth")
	}
	assertOnly(t, dir, "checkpoint.json")

	// Something else at the spare's name is left alone: the write makes a file of its own.
	if err := os.Mkdir(spare, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("sixth"), 0o644, Spare(spare)); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "sixth" {
		t.Errorf("content %q (%v), want %q", got, err, "sixth")
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v (%v), want 0644", st.Mode().Perm(), err)
	}
	if st, err := os.Stat(spare); err != nil || !st.IsDir() {
		t.Errorf("%s is %v (%v), want the directory left alone", spare, st, err)
	}
	assertOnly(t, dir, "checkpoint.json", "checkpoint.spare")

	// A spare elsewhere could not be exchanged with the file: refused before anything.
	elsewhere := filepath.Join(t.TempDir(), "checkpoint.spare")
	if err := WriteFile(path, []byte("seventh"), 0o644, Spare(elsewhere)); err == nil || !strings.Contains(err.Error(), elsewhere) {
		t.Errorf("error %v, want one naming %s", err, elsewhere)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "sixth" {
		t.Errorf("content %q (%v), want %q", got, err, "sixth")
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// BenchmarkWriteFile replaces a file of a checkpoint's size in a directory of the test's
// temporary dir (TMPDIR decides the file system: run it on a disk to see the cost of
// the replace).
func BenchmarkWriteFile(b *testing.B) {
	for _, bb := range []struct {
		name  string
		spare bool
	}{{name: "new-file"}, {name: "spare", spare: true}} {
		b.Run(bb.name, func(b *testing.B) {
			dir := b.TempDir()
			path := filepath.Join(dir, "checkpoint.json")
			var opts []Option
			if bb.spare {
				opts = append(opts, Spare(filepath.Join(dir, "checkpoint.spare")))
			}
			data := make([]byte, 3000)
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if err := WriteFile(path, data, 0o600, opts...); err != nil {
					b.Fatal(err)
				}
			}
		})
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

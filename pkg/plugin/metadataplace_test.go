package plugin

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPlaceMetadata moves the device metadata between the data directory and a metadata
// directory in every direction an install, an upgrade or a change of configuration
// takes, and checks that no file of a prepared claim is lost and nothing is left behind.
func TestPlaceMetadata(t *testing.T) {
	const file = "ns_a/rdma/metadata.json"
	type layout struct {
		// link: "" for nothing at {dataDir}/dra-device-metadata, "dir" for a directory,
		// "run" or "other" for a link to that directory, "file" for a regular file.
		link string
		// files are the metadata files (relative to what the link names) and their content.
		files map[string]string
	}
	tests := []struct {
		name   string
		before layout
		runDir string // "run" or "" (files in the data directory)
		inRun  map[string]string
		// leftovers are what a crash during an earlier placement left under the
		// temporary names: "next" or "old" to the placement (as link in layout) and
		// its files; without any, an empty directory at .next.
		leftovers map[string]layout
		wantErr   string
		want      layout
	}{
		{name: "fresh install", runDir: "run",
			want: layout{link: "run"}},
		{name: "fresh install without a metadata directory", runDir: "",
			want: layout{link: "dir"}},
		{name: "upgrade from files in the data directory", runDir: "run",
			before: layout{link: "dir", files: map[string]string{file: "A", "ns_b/x/metadata.json": "B"}},
			want:   layout{link: "run", files: map[string]string{file: "A", "ns_b/x/metadata.json": "B"}}},
		{name: "restart", runDir: "run",
			before: layout{link: "run", files: map[string]string{file: "A"}},
			want:   layout{link: "run", files: map[string]string{file: "A"}}},
		{name: "restart without a metadata directory", runDir: "",
			before: layout{link: "dir", files: map[string]string{file: "A"}},
			want:   layout{link: "dir", files: map[string]string{file: "A"}}},
		{name: "metadata directory changed", runDir: "run",
			before: layout{link: "other", files: map[string]string{file: "A"}},
			want:   layout{link: "run", files: map[string]string{file: "A"}}},
		{name: "metadata directory turned off", runDir: "",
			before: layout{link: "run", files: map[string]string{file: "A"}},
			want:   layout{link: "dir", files: map[string]string{file: "A"}}},
		{name: "a file written since is kept", runDir: "run",
			before: layout{link: "dir", files: map[string]string{file: "old"}},
			inRun:  map[string]string{file: "new"},
			want:   layout{link: "run", files: map[string]string{file: "new"}}},
		{name: "crash after the exchange", runDir: "run",
			before:    layout{link: "run", files: map[string]string{"ns_b/x/metadata.json": "B"}},
			leftovers: map[string]layout{"next": {link: "dir", files: map[string]string{file: "A"}}},
			want:      layout{link: "run", files: map[string]string{file: "A", "ns_b/x/metadata.json": "B"}}},
		{name: "crash between the renames of a file system without exchange", runDir: "run",
			leftovers: map[string]layout{"old": {link: "dir", files: map[string]string{file: "A"}}, "next": {link: "run"}},
			want:      layout{link: "run", files: map[string]string{file: "A"}}},
		{name: "crash before the first placement", runDir: "",
			leftovers: map[string]layout{"next": {link: "run"}},
			want:      layout{link: "dir"}},
		{name: "a regular file in the way", runDir: "run",
			before:  layout{link: "file"},
			wantErr: "is neither a directory nor a symbolic link",
			want:    layout{link: "file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dataDir := mkdir(t, filepath.Join(root, "data"))
			dirs := map[string]string{"run": filepath.Join(root, "run", testDriver), "other": filepath.Join(root, "other")}
			link := filepath.Join(dataDir, metadataSubDir)
			target := ""
			switch tc.before.link {
			case "dir":
				target = mkdir(t, link)
			case "run", "other":
				target = mkdir(t, dirs[tc.before.link])
				must(t, os.Symlink(target, link))
			case "file":
				must(t, os.WriteFile(link, []byte("x"), 0o600))
			}
			writeTree(t, target, tc.before.files)
			writeTree(t, dirs["run"], tc.inRun)
			if tc.leftovers == nil {
				tc.leftovers = map[string]layout{"next": {link: "dir"}}
			}
			for name, l := range tc.leftovers {
				p := filepath.Join(dataDir, ".dra-device-metadata."+name)
				d := p
				if l.link == "dir" {
					mkdir(t, p)
				} else {
					d = mkdir(t, dirs[l.link])
					must(t, os.Symlink(d, p))
				}
				writeTree(t, d, l.files)
			}

			err := placeMetadata(dataDir, dirs[tc.runDir])
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), link) {
					t.Fatalf("err = %v, want one naming %s and containing %q", err, link, tc.wantErr)
				}
				if data, err := os.ReadFile(link); err != nil || string(data) != "x" {
					t.Errorf("the file in the way was changed: %q, %v", data, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			st, err := os.Lstat(link)
			if err != nil {
				t.Fatal(err)
			}
			switch tc.want.link {
			case "dir":
				if !st.IsDir() {
					t.Errorf("%s: want a directory, got %s", link, st.Mode().Type())
				}
			case "run":
				if got, err := os.Readlink(link); err != nil || got != dirs["run"] {
					t.Errorf("%s links to %q (%v), want %s", link, got, err, dirs["run"])
				}
			}
			if got := readTree(t, link); !mapsEqual(got, tc.want.files) {
				t.Errorf("files through %s: %v, want %v", link, got, tc.want.files)
			}
			// The previous placement's files are gone from where they were, and no
			// temporary name is left.
			if tc.before.link == "other" || (tc.before.link == "run" && tc.want.link != "run") {
				if got := readTree(t, target); len(got) != 0 {
					t.Errorf("files left in the previous directory %s: %v", target, got)
				}
			}
			entries, err := os.ReadDir(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			if !slices.Equal(names, []string{metadataSubDir}) {
				t.Errorf("data directory holds %v, want only %s", names, metadataSubDir)
			}
		})
	}
}

func writeTree(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for rel, content := range files {
		p := filepath.Join(dir, rel)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(content), 0o644))
	}
}

// readTree lists the regular files under dir (following dir itself if it is a link).
func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir+"/", func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

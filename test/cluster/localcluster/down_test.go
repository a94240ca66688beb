package localcluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStatePathsKeepLogsAndCache(t *testing.T) {
	l := NewLayout("/repo")
	for name, keep := range map[string]string{"logs": l.Logs(), "a log": l.LogFile("kubelet"), "binary cache": l.Cache} {
		t.Run(name, func(t *testing.T) {
			for _, p := range l.statePaths() {
				if p == keep || strings.HasPrefix(keep, p+"/") {
					t.Errorf("Down removes %s, which holds %s", p, keep)
				}
			}
		})
	}
}

func TestRemoveContainerLogLinks(t *testing.T) {
	tests := []struct {
		name string
		// links maps a name in the log directory to its target, relative to the test's
		// directory; an empty target is a regular file.
		links    map[string]string
		wantLeft []string
	}{
		{"ours only", map[string]string{"a.log": "pod-logs/a/0.log", "b.log": "pod-logs/b/0.log"}, nil},
		{"another's link stays", map[string]string{"a.log": "pod-logs/a/0.log", "c.log": "other/c/0.log"}, []string{"c.log"}},
		{"a file stays", map[string]string{"a.log": "pod-logs/a/0.log", "d.log": ""}, []string{"d.log"}},
		{"a prefix is not a parent", map[string]string{"e.log": "pod-logs-old/e/0.log"}, []string{"e.log"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "containers")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, target := range tc.links {
				var err error
				if target == "" {
					err = os.WriteFile(filepath.Join(dir, name), nil, 0o644)
				} else {
					err = os.Symlink(filepath.Join(root, target), filepath.Join(dir, name))
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			removeContainerLogLinks(dir, filepath.Join(root, "pod-logs"))
			entries, err := os.ReadDir(dir)
			if len(tc.wantLeft) == 0 {
				if !os.IsNotExist(err) {
					t.Fatalf("%s is still there (%v), want it removed once empty", dir, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, e := range entries {
				left = append(left, e.Name())
			}
			if strings.Join(left, ",") != strings.Join(tc.wantLeft, ",") {
				t.Errorf("left %q, want %q", left, tc.wantLeft)
			}
		})
	}
}

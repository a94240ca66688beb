//go:build !failpoint

package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestFailpointOffWithoutTag checks the stubs a build without -tags failpoint, a release
// build, gets: the environment is not read, and with the hold file present and the
// context already ended (the real hold waits, or returns ctx's error) prepare is not held.
func TestFailpointOffWithoutTag(t *testing.T) {
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("RDMA_DRA_TEST_PREPARE_HOLD", hold)
	if got := PrepareHoldFile(); got != "" {
		t.Errorf("PrepareHoldFile() = %q, want \"\": the environment is read without the failpoint tag", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name string
		path string
	}{
		{name: "hold file present", path: hold},
		{name: "no path", path: ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFailpoint(tc.path)
			if f != nil {
				t.Errorf("NewFailpoint(%q) = %v, want nil (off)", tc.path, f)
			}
			if p := f.Path(); p != "" {
				t.Errorf("Path() = %q, want \"\"", p)
			}
			if err := f.Wait(ctx); err != nil {
				t.Errorf("Wait() = %v, want nil at once", err)
			}
		})
	}
}

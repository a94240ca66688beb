package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestFailpointOnlyWithTag builds the plugin as make build does and as the local cluster's
// image does (-tags failpoint), and looks in each binary for the failpoint's environment
// variable, which only the failpoint's code uses: a release binary must not have it, and
// the failpoint build shows that the search finds it. -short skips the two links.
func TestFailpointOnlyWithTag(t *testing.T) {
	if testing.Short() {
		t.Skip("links the plugin twice")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to build with: %v", err)
	}
	marker := []byte("RDMA_DRA_TEST_PREPARE_HOLD")
	for _, tc := range []struct {
		name string
		tags string
		want bool
	}{
		{name: "release build", tags: "", want: false},
		{name: "failpoint build", tags: "failpoint", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "rdma-dra-kubeletplugin")
			cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags", "-s -w", "-tags", tc.tags, "-o", bin, ".")
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go build -tags %q: %v\n%s", tc.tags, err, out)
			}
			b, err := os.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(b, marker); got != tc.want {
				t.Errorf("binary built with -tags %q has %s: %v, want %v", tc.tags, marker, got, tc.want)
			}
		})
	}
}

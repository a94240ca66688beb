package main

import (
	"bytes"
	"errors"
	"go/build"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildHook builds the binary the way a release does and returns its path.
func buildHook(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(build.Default.GOROOT, "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "rdma-dra-cdi-hook")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinary runs the built hook as a runtime would: state on stdin, exit code and
// stderr as the only answer.
func TestBinary(t *testing.T) {
	bin := buildHook(t)
	tests := []struct {
		name       string
		args       []string
		stdin      func(pid int) string
		wantCode   int
		wantStderr []string
		wantSoft   string
	}{
		{name: "raises the limit", args: []string{"memlock", "--limit", "32768"}, stdin: state,
			wantStderr: []string{`"Raised RLIMIT_MEMLOCK"`, `container="ctr-1"`, `oldSoft="16384"`, `soft="32768"`}, wantSoft: "32768"},
		{name: "bad state", args: []string{"memlock", "--limit", "unlimited"}, stdin: func(int) string { return "{" },
			wantCode: 1, wantStderr: []string{`"Hook failed"`, "decode container state from stdin"}},
		{name: "bad command line", args: []string{"memlock", "--limit", "much"}, stdin: state,
			wantCode: 2, wantStderr: []string{`"Invalid command line"`, `\"much\" is not a positive number`, "usage: rdma-dra-cdi-hook memlock"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pid := startChild(t)
			lowerLimits(t, pid) // room to raise without privilege
			before, _ := memlockOf(t, pid)
			cmd := exec.Command(bin, tc.args...)
			cmd.Stdin = strings.NewReader(tc.stdin(pid))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var exitErr *exec.ExitError
			if errors.As(err, &exitErr) {
				code = exitErr.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, stderr.String())
			}
			for _, s := range tc.wantStderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %s:\n%s", s, stderr.String())
				}
			}
			want := tc.wantSoft
			if want == "" {
				want = before
			}
			if soft, _ := memlockOf(t, pid); soft != want {
				t.Errorf("soft limit %s, want %s", soft, want)
			}
		})
	}
}

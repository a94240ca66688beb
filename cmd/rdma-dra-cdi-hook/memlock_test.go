package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// startChild starts a process that stands in for the container's first process.
func startChild(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd.Process.Pid
}

// state is the OCI state a runtime passes to a createContainer hook.
func state(pid int) string {
	return fmt.Sprintf(`{"ociVersion":"1.2.0","id":"ctr-1","status":"creating","pid":%d,"bundle":"/run/bundle"}`, pid)
}

// memlockOf reads the soft and hard "Max locked memory" of pid as the kernel shows them.
func memlockOf(t *testing.T, pid int) (soft, hard string) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max locked memory"); ok {
			f := strings.Fields(rest)
			if len(f) < 2 {
				t.Fatalf("odd limits line %q", line)
			}
			return f[0], f[1]
		}
	}
	t.Fatalf("no Max locked memory in /proc/%d/limits", pid)
	return "", ""
}

// canRaiseHardLimits reports whether this process has CAP_SYS_RESOURCE, which raising a
// hard limit needs. Being root is not enough: containers often drop the capability.
func canRaiseHardLimits(t *testing.T) bool {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if hex, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
			if err != nil {
				t.Fatalf("parse %q: %v", line, err)
			}
			return caps&(1<<unix.CAP_SYS_RESOURCE) != 0
		}
	}
	t.Fatal("no CapEff in /proc/self/status")
	return false
}

// lowerLimits gives the child small limits, which needs no privilege, so that the hook
// has room to raise the soft limit up to the hard one in any environment.
func lowerLimits(t *testing.T, pid int) {
	t.Helper()
	if err := unix.Prlimit(pid, unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 16 << 10, Max: 32 << 10}, nil); err != nil {
		t.Fatalf("lower the child's limits: %v", err)
	}
}

func TestMemlockOnRealProcess(t *testing.T) {
	tests := []struct {
		name               string
		limit              string
		wantSoft, wantHard string
		// raisesHard needs CAP_SYS_RESOURCE; without it the hook must fail clearly.
		raisesHard bool
	}{
		{name: "soft up to below hard", limit: "24576", wantSoft: "24576", wantHard: "32768"},
		{name: "soft up to hard", limit: "32768", wantSoft: "32768", wantHard: "32768"},
		{name: "never lowers", limit: "8192", wantSoft: "16384", wantHard: "32768"},
		{name: "bytes above hard", limit: fmt.Sprint(64 << 30), wantSoft: "68719476736", wantHard: "68719476736", raisesHard: true},
		{name: "unlimited", limit: "unlimited", wantSoft: "unlimited", wantHard: "unlimited", raisesHard: true},
	}
	privileged := canRaiseHardLimits(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			pid := startChild(t)
			lowerLimits(t, pid)
			err := run(ctx, []string{"memlock", "--limit", tc.limit}, strings.NewReader(state(pid)))
			if tc.raisesHard && !privileged {
				want := fmt.Sprintf("raise RLIMIT_MEMLOCK of pid %d from 16384/32768 to %s/%s: operation not permitted", pid, tc.wantSoft, tc.wantHard)
				if err == nil || err.Error() != want || !errors.Is(err, unix.EPERM) {
					t.Fatalf("error:\n got: %v\nwant: %s", err, want)
				}
				tc.wantSoft, tc.wantHard = "16384", "32768"
			} else if err != nil {
				t.Fatal(err)
			}
			soft, hard := memlockOf(t, pid)
			if soft != tc.wantSoft || hard != tc.wantHard {
				t.Errorf("Max locked memory = %s %s, want %s %s", soft, hard, tc.wantSoft, tc.wantHard)
			}
		})
	}
}

func TestBadInput(t *testing.T) {
	exited := func() int {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}()
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  string
		usage bool
	}{
		{name: "no command", want: "usage: no command given", usage: true},
		{name: "unknown command", args: []string{"nofile"}, want: `usage: unknown command "nofile"`, usage: true},
		{name: "no limit", args: []string{"memlock"}, want: "usage: --limit: missing", usage: true},
		{name: "unknown flag", args: []string{"memlock", "--lim", "1"}, want: "usage: flag provided but not defined: -lim", usage: true},
		{name: "limit zero", args: []string{"memlock", "--limit", "0"},
			want: `usage: --limit: "0" is not a positive number of bytes or unlimited`, usage: true},
		{name: "limit quantity", args: []string{"memlock", "--limit", "64Gi"},
			want: `usage: --limit: "64Gi" is not a positive number of bytes or unlimited`, usage: true},
		{name: "limit negative", args: []string{"memlock", "--limit=-1"},
			want: `usage: --limit: "-1" is not a positive number of bytes or unlimited`, usage: true},
		{name: "extra argument", args: []string{"memlock", "--limit", "1", "now"}, want: `usage: unexpected arguments ["now"]`, usage: true},
		{name: "empty stdin", args: []string{"memlock", "--limit", "1"}, stdin: "",
			want: "decode container state from stdin: unexpected end of JSON input"},
		{name: "stdin not json", args: []string{"memlock", "--limit", "1"}, stdin: "pid=1",
			want: "decode container state from stdin: invalid character 'p' looking for beginning of value"},
		{name: "no pid", args: []string{"memlock", "--limit", "1"}, stdin: `{"id":"ctr-1","status":"creating"}`,
			want: `container state of "ctr-1" has no pid (0)`},
		{name: "pid gone", args: []string{"memlock", "--limit", "1"}, stdin: state(exited),
			want: fmt.Sprintf("read RLIMIT_MEMLOCK of pid %d: no such process", exited)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			err := run(ctx, tc.args, bytes.NewBufferString(tc.stdin))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error:\n got: %v\nwant: %s", err, tc.want)
			}
			if errors.Is(err, errUsage) != tc.usage {
				t.Errorf("usage error = %v, want %v", errors.Is(err, errUsage), tc.usage)
			}
		})
	}
}

//go:build kernelvm

package invm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// memlockOf reads "Max locked memory" of a process from /proc, as "soft hard".
func memlockOf(t *testing.T, pid int) string {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/limits", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(l, "Max locked memory"); ok {
			f := strings.Fields(rest)
			if len(f) >= 2 {
				return f[0] + " " + f[1]
			}
		}
	}
	t.Fatalf("no Max locked memory in /proc/%d/limits:\n%s", pid, data)
	return ""
}

// TestMemlockHook runs the CDI hook the way the runtime does (the container state on
// stdin) against a real process whose RLIMIT_MEMLOCK starts at 64 KiB: the hook raises
// soft and hard limits, never lowers them, and raises to unlimited.
func TestMemlockHook(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A "container" process: busybox sh lowers its limits (in KiB), then becomes sleep.
	proc := exec.CommandContext(ctx, "sh", "-c", "ulimit -l 64 && exec sleep 120")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = proc.Wait() }()
	pid := proc.Process.Pid
	eventually(t, "the process lowers its limit", func() (bool, string) {
		got := memlockOf(t, pid)
		return got == "65536 65536", got
	})
	for _, step := range []struct{ limit, want string }{
		{"67108864", "67108864 67108864"},
		{"1048576", "67108864 67108864"}, // never lowered
		{"unlimited", "unlimited unlimited"},
	} {
		hook := exec.CommandContext(ctx, "rdma-dra-cdi-hook", "memlock", "--limit", step.limit)
		hook.Stdin = strings.NewReader(fmt.Sprintf(`{"ociVersion":"1.2.0","id":"c1","status":"created","pid":%d,"bundle":"/tmp"}`, pid))
		if out, err := hook.CombinedOutput(); err != nil {
			t.Fatalf("hook --limit %s: %v: %s", step.limit, err, out)
		}
		if got := memlockOf(t, pid); got != step.want {
			t.Errorf("after --limit %s: %s, want %s", step.limit, got, step.want)
		}
	}
	hook := exec.CommandContext(ctx, "rdma-dra-cdi-hook", "memlock", "--limit", "unlimited")
	hook.Stdin = strings.NewReader(`{"ociVersion":"1.2.0","id":"c1","status":"created","pid":999999,"bundle":"/tmp"}`)
	out, err := hook.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "999999") {
		t.Errorf("hook for a process that does not exist: %v, %s; want an error naming the pid", err, out)
	}
}

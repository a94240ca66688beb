package localcluster

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestProcessLifecycle(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc")
	}
	l := Layout{Out: t.TempDir()}
	// Pids() lives under RunRoot in real use; a test keeps everything in its temp dir.
	name := "sleeper"
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	r, err := startProcessIn(l, l.Out, name, []string{sleep, "60"})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if !r.alive() {
		t.Fatal("started process is not alive")
	}
	if _, err := startProcessIn(l, l.Out, name, []string{sleep, "60"}); err == nil {
		t.Fatal("second start of a running process succeeded")
	}
	stopped, err := stopProcessIn(l.Out, name, 2*time.Second)
	if err != nil || !stopped {
		t.Fatalf("stop = %v, %v", stopped, err)
	}
	if r.alive() {
		t.Fatal("process alive after stop")
	}
	if stopped, err := stopProcessIn(l.Out, name, time.Second); err != nil || stopped {
		t.Fatalf("second stop = %v, %v; want false, nil", stopped, err)
	}
	// A pid file whose start time does not match is not ours.
	if (pidRecord{Pid: os.Getpid(), Start: 1}).alive() {
		t.Fatal("pid with a wrong start time counted as alive")
	}
}

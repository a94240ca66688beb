package localcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidRecord identifies a process we started: its pid and its start time in clock ticks
// since boot, so a recycled pid is never mistaken for ours.
type pidRecord struct {
	Pid   int
	Start uint64
}

// startTime reads field 22 of /proc/<pid>/stat.
func startTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; it ends at the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat: %d fields", pid, len(fields))
	}
	return strconv.ParseUint(fields[19], 10, 64)
}

func readPidFile(path string) (pidRecord, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return pidRecord{}, err
	}
	var r pidRecord
	if _, err := fmt.Sscanf(string(data), "%d %d", &r.Pid, &r.Start); err != nil {
		return pidRecord{}, fmt.Errorf("parse %s: %w", path, err)
	}
	return r, nil
}

// alive reports whether the recorded process still runs (same pid, same start time, not a
// zombie).
func (r pidRecord) alive() bool {
	st, err := startTime(r.Pid)
	if err != nil || st != r.Start {
		return false
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", r.Pid))
	if err != nil {
		return false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || !strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// startProcess starts argv detached from our session (it outlives cluster-up and ignores
// the terminal's ^C), appends its output to the log file and records its pid file.
func startProcess(l Layout, name string, argv, env []string) (pidRecord, error) {
	return startProcessIn(l, l.Pids(), name, argv, env...)
}

// startProcessIn is startProcess with the pid file in pidDir.
func startProcessIn(l Layout, pidDir, name string, argv []string, env ...string) (pidRecord, error) {
	pidFile := filepath.Join(pidDir, name+".pid")
	if r, err := readPidFile(pidFile); err == nil && r.alive() {
		return r, fmt.Errorf("%s already runs as pid %d", name, r.Pid)
	}
	for _, d := range []string{l.Logs(), pidDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return pidRecord{}, fmt.Errorf("create %s: %w", d, err)
		}
	}
	logf, err := os.OpenFile(l.LogFile(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return pidRecord{}, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "=== %s started by localcluster: %s\n", time.Now().Format(time.RFC3339), strings.Join(argv, " "))
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), env...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return pidRecord{}, fmt.Errorf("start %s: %w", name, err)
	}
	// We do not wait for it; release it so it is not reaped as our child on exit.
	pid := cmd.Process.Pid
	go cmd.Wait() //nolint:errcheck // reaps the child if it dies while we still run
	st, err := startTime(pid)
	if err != nil {
		return pidRecord{}, fmt.Errorf("start time of %s (pid %d, exited at once? see %s): %w", name, pid, l.LogFile(name), err)
	}
	r := pidRecord{Pid: pid, Start: st}
	if err := os.WriteFile(pidFile, []byte(fmt.Sprintf("%d %d\n", r.Pid, r.Start)), 0o644); err != nil {
		return r, fmt.Errorf("write pid file of %s: %w", name, err)
	}
	return r, nil
}

// stopProcess stops the process of a pid file: SIGTERM, then SIGKILL after grace. A missing
// pid file or a process that is gone is not an error.
func stopProcess(l Layout, name string, grace time.Duration) (bool, error) {
	return stopProcessIn(l.Pids(), name, grace)
}

// stopProcessIn is stopProcess with the pid file in pidDir.
func stopProcessIn(pidDir, name string, grace time.Duration) (bool, error) {
	path := filepath.Join(pidDir, name+".pid")
	r, err := readPidFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	stopped := false
	if r.alive() {
		stopped = true
		_ = syscall.Kill(r.Pid, syscall.SIGTERM)
		deadline := time.Now().Add(grace)
		for r.alive() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if r.alive() {
			_ = syscall.Kill(r.Pid, syscall.SIGKILL)
			for i := 0; i < 50 && r.alive(); i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
		if r.alive() {
			return stopped, fmt.Errorf("%s (pid %d) survived SIGKILL", name, r.Pid)
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return stopped, fmt.Errorf("remove %s: %w", path, err)
	}
	return stopped, nil
}

// processesOf returns the pids of running processes whose executable is exe, e.g. the
// containerd shims of our containerd (they detach from it, so no pid file names them).
func processesOf(exe string) []int {
	want, err := filepath.EvalSymlinks(exe)
	if err != nil {
		return nil
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && got == want {
			pids = append(pids, pid)
		}
	}
	return pids
}

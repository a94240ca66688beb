package controlplane

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// Process is a child process a harness started, in a process group of its own.
type Process struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// StartProcess starts argv with its output appended to logPath.
func StartProcess(ctx context.Context, name, logPath, bin string, args ...string) (*Process, error) {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	fmt.Fprintf(logf, "=== %s %s %s\n", time.Now().Format(time.RFC3339), bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	klog.FromContext(ctx).V(1).Info("Started process", "name", name, "pid", cmd.Process.Pid, "log", logPath)
	return p, nil
}

// Pid is the process ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Err is how the process ended; nil while it runs or when it exited cleanly.
func (p *Process) Err() error {
	if !p.Exited() {
		return nil
	}
	return p.err
}

// Exited says whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after grace.
func (p *Process) Stop(ctx context.Context, grace time.Duration) {
	if p.Exited() {
		return
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		klog.FromContext(ctx).Info("Process did not stop in time, killing it", "name", p.name, "pid", p.Pid())
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.done
	}
}

// waitReady waits until check passes while p runs; when p ends first, the error also
// says how it ended.
func (p *Process) waitReady(ctx context.Context, timeout time.Duration, check Check) error {
	err := WaitFor(ctx, p.name, timeout, func() bool { return !p.Exited() }, check)
	if err != nil && p.Exited() {
		return fmt.Errorf("%w (%s)", err, p.cmd.ProcessState)
	}
	return err
}

package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// BootOptions configure one boot.
type BootOptions struct {
	// QEMU is the emulator; qemu-system-x86_64 from PATH when empty.
	QEMU string
	// MemoryMiB and CPUs size the VM; 1024 and 2 when zero.
	MemoryMiB, CPUs int
	// Dir receives console.log (the kernel's and init's console) and results.log (the
	// second serial port, where the tests write).
	Dir string
	// Timeout bounds the boot and the tests; 10 minutes when zero.
	Timeout time.Duration
	// Accel is QEMU's accelerator: tcg (software emulation, the default: it runs
	// anywhere) or kvm, where /dev/kvm works (on this project's build machines it opens
	// but fails to set the CPU's MSRs, so it is not tried on its own).
	Accel string
}

// Run is what one boot produced.
type Run struct {
	// Results are the tests' results, in the order they ran.
	Results []Result
	// Exit is the test binary's exit status as /init reported it.
	Exit int
	// Accel is the accelerator QEMU used (kvm or tcg); Elapsed the wall time of the boot.
	Accel   string
	Elapsed time.Duration
	// Console and ResultsLog are the logs' paths.
	Console, ResultsLog string
}

// exitLine is what /init writes after the test binary returns.
var exitLine = regexp.MustCompile(`^vm: tests exited (\d+)$`)

// ExitMarker is the line /init writes on the results port after the tests, with their
// exit status; Boot reads it back.
func ExitMarker(statusVar string) string { return "vm: tests exited " + statusVar }

// Boot boots img and waits for /init to power the VM off.
func Boot(ctx context.Context, img *Image, opts BootOptions) (*Run, error) {
	if opts.QEMU == "" {
		opts.QEMU = "qemu-system-x86_64"
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 1024
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Minute
	}
	if _, err := exec.LookPath(opts.QEMU); err != nil {
		return nil, fmt.Errorf("%s not found: install Debian's qemu-system-x86 (apt-get install --no-install-recommends qemu-system-x86): %w", opts.QEMU, err)
	}
	run := &Run{Accel: opts.Accel, Console: filepath.Join(opts.Dir, "console.log"), ResultsLog: filepath.Join(opts.Dir, "results.log")}
	cpu := "max"
	switch opts.Accel {
	case "", "tcg":
		run.Accel = "tcg"
	case "kvm":
		cpu = "host"
	default:
		return nil, fmt.Errorf("unknown accelerator %q: want tcg or kvm", opts.Accel)
	}
	for _, f := range []string{run.Console, run.ResultsLog} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-accel", run.Accel, "-cpu", cpu,
		"-m", strconv.Itoa(opts.MemoryMiB), "-smp", strconv.Itoa(opts.CPUs),
		"-kernel", img.Kernel, "-initrd", img.Initramfs,
		// panic=-1 reboots at once on a panic, and -no-reboot turns that into an exit.
		"-append", "console=ttyS0 panic=-1 loglevel=4 rdinit=/init",
		"-serial", "file:" + run.Console, "-serial", "file:" + run.ResultsLog,
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, opts.QEMU, args...)
	out, err := cmd.CombinedOutput()
	run.Elapsed = time.Since(start)
	if ctx.Err() != nil {
		return run, fmt.Errorf("VM did not power off within %s (console: %s):\n%s", opts.Timeout, run.Console, tail(run.Console, 30))
	}
	if err != nil {
		return run, fmt.Errorf("qemu: %w: %s", err, bytes.TrimSpace(out))
	}
	data, err := os.ReadFile(run.ResultsLog)
	if err != nil {
		return run, fmt.Errorf("test results: %w", err)
	}
	results, exit, err := ParseResults(data)
	run.Results = results
	run.Exit = exit
	if err != nil {
		return run, fmt.Errorf("%w (console: %s):\n%s", err, run.Console, tail(run.Console, 30))
	}
	return run, nil
}

// tail returns the last n lines of a file, for error messages.
func tail(name string, n int) string {
	data, err := os.ReadFile(name)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Result is one top-level test's outcome with everything it printed.
type Result struct {
	Name string
	// Outcome is PASS, FAIL or SKIP.
	Outcome string
	Output  string
}

var (
	runLine    = regexp.MustCompile(`^=== RUN\s+(\S+)$`)
	resultLine = regexp.MustCompile(`^--- (PASS|FAIL|SKIP): (\S+) \(`)
)

// ParseResults reads `go test -v` output followed by the exit marker: one Result per
// top-level test. Output without the marker (the VM crashed or hung), or a test that
// started and never finished, is an error; the results up to there are returned.
func ParseResults(data []byte) ([]Result, int, error) {
	var (
		results []Result
		cur     *Result
		buf     strings.Builder
	)
	exit := -1
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		if m := exitLine.FindStringSubmatch(line); m != nil {
			exit, _ = strconv.Atoi(m[1])
			continue
		}
		if m := runLine.FindStringSubmatch(line); m != nil && !strings.Contains(m[1], "/") && cur == nil {
			cur = &Result{Name: m[1]}
			buf.Reset()
		}
		if cur == nil {
			// go test prints a test's subtest results after its own: indented lines
			// after a result belong to it.
			if n := len(results); n > 0 && strings.HasPrefix(line, " ") {
				results[n-1].Output += line + "\n"
			}
			continue
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
		if m := resultLine.FindStringSubmatch(line); m != nil && m[2] == cur.Name {
			cur.Outcome, cur.Output = m[1], buf.String()
			results = append(results, *cur)
			cur = nil
		}
	}
	if err := sc.Err(); err != nil {
		return results, exit, err
	}
	if cur != nil {
		return results, exit, fmt.Errorf("test %s started and never finished; its output:\n%s", cur.Name, buf.String())
	}
	if exit < 0 {
		return results, exit, errors.New("the tests did not finish: no exit status on the results port")
	}
	if exit != 0 && !failed(results) {
		return results, exit, fmt.Errorf("the test binary exited %d without a failed test:\n%s", exit, data)
	}
	return results, exit, nil
}

func failed(results []Result) bool {
	for _, r := range results {
		if r.Outcome == "FAIL" {
			return true
		}
	}
	return false
}

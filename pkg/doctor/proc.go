package doctor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// process is one process found below the /proc root.
type process struct {
	pid  int
	args []string
}

// findProcesses returns, for each of names, the processes whose comm is exactly that name,
// lowest pid first. containerd's shims (containerd-shim-runc-v2, comm containerd-shim)
// do not match containerd. A process that exits during the scan is skipped.
func (e *env) findProcesses(names ...string) map[string][]process {
	out := map[string][]process{}
	ents, err := os.ReadDir(e.h.ProcRoot)
	if err != nil {
		e.logger.V(2).Info("Cannot list processes", "procRoot", e.h.ProcRoot, "err", err)
		return out
	}
	var pids []int
	for _, ent := range ents {
		if pid, err := strconv.Atoi(ent.Name()); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	for _, pid := range pids {
		dir := filepath.Join(e.h.ProcRoot, strconv.Itoa(pid))
		comm, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil {
			continue
		}
		name := strings.TrimSpace(string(comm))
		if !slices.Contains(names, name) {
			continue
		}
		p := process{pid: pid}
		if cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline")); err == nil {
			p.args = strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		}
		out[name] = append(out[name], p)
	}
	return out
}

// flagValue returns the value of a command-line flag given as --long X, --long=X, -short X
// or -short=X, or "" when it is not there.
func flagValue(args []string, long, short string) string {
	for i, a := range args {
		for _, name := range []string{"--" + long, "-" + long, "-" + short} {
			if a == name && i+1 < len(args) {
				return args[i+1]
			}
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
	}
	return ""
}

// rlimit is one limit of /proc/<pid>/limits.
type rlimit struct {
	unlimited bool
	bytes     uint64
}

func (l rlimit) String() string {
	if l.unlimited {
		return "unlimited"
	}
	return formatBytes(l.bytes)
}

// errNoMemlock is the error of a limits file without a "Max locked memory" line.
var errNoMemlock = errors.New(`no "Max locked memory" line`)

// parseMemlock reads the soft and hard "Max locked memory" limits from the text of a
// /proc/<pid>/limits file:
//
//	Limit                     Soft Limit           Hard Limit           Units
//	Max locked memory         8388608              8388608              bytes
func parseMemlock(limits string) (soft, hard rlimit, err error) {
	for line := range strings.SplitSeq(limits, "\n") {
		rest, ok := strings.CutPrefix(line, "Max locked memory")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) < 2 {
			return soft, hard, fmt.Errorf("parse %q: want soft and hard limit", line)
		}
		if soft, err = parseRlimit(f[0]); err != nil {
			return soft, hard, fmt.Errorf("parse soft memlock limit: %w", err)
		}
		if hard, err = parseRlimit(f[1]); err != nil {
			return soft, hard, fmt.Errorf("parse hard memlock limit: %w", err)
		}
		return soft, hard, nil
	}
	return soft, hard, errNoMemlock
}

func parseRlimit(s string) (rlimit, error) {
	if s == "unlimited" {
		return rlimit{unlimited: true}, nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return rlimit{}, fmt.Errorf("%q is neither a number nor unlimited", s)
	}
	return rlimit{bytes: v}, nil
}

// formatBytes writes a size in the largest binary unit that divides it: 8388608 is 8 MiB.
func formatBytes(b uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for b >= 1024 && b%1024 == 0 && i < len(units)-1 {
		b /= 1024
		i++
	}
	return strconv.FormatUint(b, 10) + " " + units[i]
}

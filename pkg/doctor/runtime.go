package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The container runtimes, by the comm of their process.
const (
	runtimeContainerd = "containerd"
	runtimeCRIO       = "crio"
)

// runtime is one container runtime found on the node.
type runtime struct {
	name string
	// procs are its processes, lowest pid first; empty when it does not run.
	procs []process
	// ver is what its executable says about its version.
	ver version
	// configPath is the config file checked; cd or crio is its content, cfgErr why it
	// could not be read.
	configPath string
	cd         *containerdConfig
	crio       *crioConfig
	cfgErr     error
}

// version is a runtime's version as far as it is known.
type version struct {
	// major is known when > 0; minor when minorKnown.
	major, minor int
	minorKnown   bool
	// text is for findings: "v2.4.2", "2.x", or "version unknown".
	text string
}

// atLeast reports whether the version is known to be at least major.minor.
func (v version) atLeast(major, minor int) bool {
	return v.major > major || v.major == major && v.minorKnown && v.minor >= minor
}

// below reports whether the version is known to be below major.minor.
func (v version) below(major, minor int) bool {
	return v.major > 0 && (v.major < major || v.major == major && v.minorKnown && v.minor < minor)
}

// runtimeVersion reads a runtime's version from its running executable's build info: the
// main module's version when it is a release (v2.4.2), else, for containerd, the major
// version from the module path (github.com/containerd/containerd/v2).
func (e *env) runtimeVersion(rt *runtime) version {
	v := version{text: "version unknown"}
	if len(rt.procs) == 0 {
		return v
	}
	exe := filepath.Join(e.h.ProcRoot, strconv.Itoa(rt.procs[0].pid), "exe")
	info, err := e.h.Executable(exe)
	if err != nil {
		e.logger.V(2).Info("Cannot tell the runtime's version", "runtime", rt.name, "exe", exe, "err", err)
		return v
	}
	if rt.name == runtimeContainerd {
		switch {
		case strings.HasPrefix(info.Module, "github.com/containerd/containerd/v2"):
			v.major, v.text = 2, "2.x"
		case info.Module == "github.com/containerd/containerd":
			v.major, v.text = 1, "1.x"
		}
	}
	if major, minor, ok := parseSemver(info.Version); ok && (v.major == 0 || v.major == major) {
		v.major, v.minor, v.minorKnown, v.text = major, minor, true, info.Version
	}
	return v
}

// parseSemver reads major and minor from vMAJOR.MINOR[.PATCH...].
func parseSemver(s string) (major, minor int, ok bool) {
	rest, ok := strings.CutPrefix(s, "v")
	if !ok {
		return 0, 0, false
	}
	parts := strings.SplitN(rest, ".", 3)
	if len(parts) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor, err2 := strconv.Atoi(parts[1])
	return major, minor, err1 == nil && err2 == nil && major > 0
}

// detectRuntimes finds containerd and CRI-O: those that run when any does, else those
// whose config file exists.
func (e *env) detectRuntimes() []*runtime {
	procs := e.findProcesses(runtimeContainerd, runtimeCRIO)
	running := len(procs[runtimeContainerd]) > 0 || len(procs[runtimeCRIO]) > 0
	var out []*runtime
	for _, rt := range []*runtime{
		{name: runtimeContainerd, configPath: e.h.ContainerdConfig},
		{name: runtimeCRIO, configPath: e.h.CRIOConfig},
	} {
		rt.procs = procs[rt.name]
		if running && len(rt.procs) == 0 {
			continue
		}
		if rt.name == runtimeContainerd {
			rt.cd, rt.cfgErr = loadContainerd(rt.configPath)
		} else {
			rt.crio, rt.cfgErr = loadCRIO(rt.configPath)
		}
		if !running && rt.cfgErr == nil && (rt.cd != nil && !rt.cd.exists || rt.crio != nil && !rt.crio.exists) {
			continue
		}
		rt.ver = e.runtimeVersion(rt)
		out = append(out, rt)
	}
	return out
}

// checkRuntimes runs the runtime checks: what was found, then CDI of each runtime, the
// CDI spec directories, NRI of each runtime, memlock of each runtime.
func checkRuntimes(e *env) []Result {
	rts := e.detectRuntimes()
	out := []Result{runtimeFound(e, rts)}
	for _, rt := range rts {
		out = append(out, withConfig(rt, CheckCDISuffix, func() Result { return checkCDI(e, rt) }))
	}
	out = append(out, checkCDISpecDirs(e))
	for _, rt := range rts {
		out = append(out, withConfig(rt, CheckNRISuffix, func() Result { return checkNRI(e, rt) }))
	}
	for _, rt := range rts {
		out = append(out, checkMemlock(e, rt))
	}
	return out
}

// withConfig runs a check that needs the runtime's config, or skips it when the config
// could not be read.
func withConfig(rt *runtime, suffix string, check func() Result) Result {
	if rt.cfgErr != nil {
		return Result{Check: rt.name + suffix, Status: Skip, Found: "config unreadable (see " + CheckRuntime + ")"}
	}
	return check()
}

// runtimeFound says which runtimes the checks below looked at.
func runtimeFound(e *env, rts []*runtime) Result {
	r := Result{Check: CheckRuntime, Status: OK}
	if len(rts) == 0 {
		r.Status = Skip
		r.Found = fmt.Sprintf("neither containerd nor CRI-O found: no process named containerd or crio below %s, and neither %s nor %s exists",
			e.h.ProcRoot, e.h.ContainerdConfig, e.h.CRIOConfig)
		return r
	}
	var found, fixes []string
	for _, rt := range rts {
		s := rt.name + " " + rt.ver.text
		switch len(rt.procs) {
		case 0:
			s += " (not running)"
		case 1:
			s += fmt.Sprintf(" (pid %d)", rt.procs[0].pid)
		default:
			s += fmt.Sprintf(" (pid %d and %d more)", rt.procs[0].pid, len(rt.procs)-1)
		}
		switch {
		case rt.cfgErr != nil:
			r.Status = Fail
			s += ": " + rt.cfgErr.Error()
			fixes = append(fixes, "fix the syntax of "+rt.configPath+" (the runtime refuses it as well)")
		case rt.cd != nil && rt.cd.exists:
			s += fmt.Sprintf(", config %s (version %d)", rt.configPath, rt.cd.version)
		case rt.crio != nil && rt.crio.exists:
			s += fmt.Sprintf(", config %s and %s", rt.configPath, rt.crio.dropIns)
		default:
			s += ", no config file: built-in defaults"
		}
		found = append(found, s)
		// A runtime started with another config file than the one checked makes every
		// finding below about the wrong file.
		if len(rt.procs) > 0 {
			if other := flagValue(rt.procs[0].args, "config", "c"); other != "" && filepath.Clean(other) != filepath.Clean(rt.configPath) {
				r.Status = Worst(r.Status, Warn)
				found[len(found)-1] += fmt.Sprintf("; but pid %d runs with --config %s", rt.procs[0].pid, other)
				flag := "--containerd-config"
				if rt.name == runtimeCRIO {
					flag = "--crio-config"
				}
				fixes = append(fixes, fmt.Sprintf("check the file it uses: %s %s", flag, other))
			}
		}
	}
	r.Found = strings.Join(found, "; ")
	if len(fixes) > 0 {
		r.Fix = capitalize(strings.Join(fixes, "; ")) + "."
	}
	return r
}

// checkMemlock: RDMA pins memory, and containers whose claims do not raise the limit get
// the runtime's.
func checkMemlock(e *env, rt *runtime) Result {
	r := Result{Check: rt.name + CheckMemlockSuffix}
	if rt.name == runtimeCRIO && rt.crio != nil {
		soft, hard, set, err := crioMemlock(rt.crio)
		switch {
		case err != nil:
			r.Status, r.Found = Warn, err.Error()
			r.Fix = `Write it as "memlock=SOFT:HARD" in bytes, -1 for unlimited.`
			return r
		case set:
			return memlockResult(r, soft, hard, "default_ulimits "+rt.crio.source(crioRuntimeTable, "default_ulimits")+" gives containers", "", rt)
		}
	}
	if len(rt.procs) == 0 {
		r.Status, r.Found = Skip, rt.name+" is not running: no process to read the limit of"
		return r
	}
	pid := rt.procs[0].pid
	file := filepath.Join(e.h.ProcRoot, strconv.Itoa(pid), "limits")
	data, err := os.ReadFile(file)
	if err != nil {
		r.Status, r.Found = Skip, fmt.Sprintf("cannot read the limits of pid %d: %v", pid, err)
		return r
	}
	soft, hard, err := parseMemlock(string(data))
	if err != nil {
		r.Status, r.Found = Skip, fmt.Sprintf("%s: %v", file, err)
		return r
	}
	return memlockResult(r, soft, hard, fmt.Sprintf("%s (pid %d):", rt.name, pid), ", which containers inherit", rt)
}

// memlockResult judges a limit: unlimited is right for RDMA, anything else needs claims
// to raise it.
func memlockResult(r Result, soft, hard rlimit, who, inherit string, rt *runtime) Result {
	r.Found = fmt.Sprintf("%s max locked memory %s (hard %s)%s", who, soft, hard, inherit)
	if soft.unlimited {
		r.Status = OK
		return r
	}
	r.Status = Warn
	r.Found += ": too little for RDMA buffers unless each claim raises it"
	raise := "LimitMEMLOCK=infinity in a systemd drop-in of " + rt.name + ".service, then systemctl daemon-reload and restart it"
	if rt.name == runtimeCRIO {
		raise = `default_ulimits = ["memlock=-1:-1"] in [crio.runtime], or ` + raise
	}
	r.Fix = "Let claims raise it: RdmaConfig memlock: unlimited (or a size) makes the driver's rdma-dra-cdi-hook raise the container's limit at createContainer; or raise it for all containers: " + raise + "."
	return r
}

package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strconv"
	"strings"
)

// cdiDir compares spec directories the way the kernel resolves them on a usual node,
// where /var/run is a link to /run.
func cdiDir(p string) string {
	p = path.Clean(p)
	if rest, ok := strings.CutPrefix(p, "/var/run/"); ok {
		return "/run/" + rest
	}
	if p == "/var/run" {
		return "/run"
	}
	return p
}

// missingDirs returns the directories of want that scanned does not include.
func missingDirs(want, scanned []string) []string {
	have := map[string]bool{}
	for _, d := range scanned {
		have[cdiDir(d)] = true
	}
	var out []string
	for _, d := range want {
		if !have[cdiDir(d)] {
			out = append(out, d)
		}
	}
	return out
}

// checkCDI: the runtime must inject CDI devices and scan the directories the driver
// writes its specs to.
func checkCDI(e *env, rt *runtime) Result {
	r := Result{Check: rt.name + CheckCDISuffix}
	var on *bool
	var why, section, restart string
	var dirs []string
	var dirsSet bool
	yes, no := true, false
	switch rt.name {
	case runtimeContainerd:
		c := rt.cd
		section, restart = c.criSection(), "systemctl restart containerd"
		enable, set := boolKey(c.cri, "enable_cdi")
		switch {
		case rt.ver.below(1, 7):
			r.Status = Fail
			r.Found = "containerd " + rt.ver.text + " has no CDI support"
			r.Fix = "Upgrade containerd to 2.x (or 1.7 with enable_cdi = true)."
			return r
		case rt.ver.atLeast(2, 4):
			on, why = &yes, "always on in containerd 2.4 and later"
			if set && !enable {
				why += " (enable_cdi = false in " + c.criFrom + " is ignored)"
			}
		case set:
			on, why = &enable, fmt.Sprintf("enable_cdi = %v in %s", enable, c.criFrom)
		case rt.ver.major >= 2:
			on, why = &yes, "the default of containerd 2.x"
		case rt.ver.major == 1:
			on, why = &no, "the default of containerd 1.7"
		case c.exists && c.version >= 3:
			on, why = &yes, "the default of containerd 2.x, which version 3 configs are for"
		}
		dirs, dirsSet = stringsKey(c.cri, "cdi_spec_dirs")
	case runtimeCRIO:
		section, restart = "[crio.runtime]", "systemctl restart crio"
		on, why = &yes, "always on in CRI-O"
		dirs, dirsSet = stringsKey(rt.crio.table(crioRuntimeTable), "cdi_spec_dirs")
	}
	dirsText := "default"
	if !dirsSet {
		dirs = DefaultCDIDirs
	} else if rt.name == runtimeContainerd {
		dirsText = "in " + rt.cd.criFrom
	} else {
		dirsText = rt.crio.source(crioRuntimeTable, "cdi_spec_dirs")
	}
	scan := fmt.Sprintf("scans %s (%s)", strings.Join(dirs, ", "), dirsText)
	switch {
	case on == nil:
		r.Status = Warn
		tells := "; there is no config file, and the running binary does not tell which this is"
		if rt.cd.exists {
			tells = ", and neither the config (version " + strconv.Itoa(rt.cd.version) + ") nor the running binary tells which this is"
		}
		r.Found = "CDI is off by default in containerd 1.7 and on in 2.x" + tells + "; " + scan
		r.Fix = fmt.Sprintf("Set enable_cdi = true in %s of %s (harmless on 2.x), then %s.", section, rt.configPath, restart)
		return r
	case !*on:
		r.Status = Fail
		r.Found = "CDI off (" + why + "): containers of claims get none of their devices"
		r.Fix = fmt.Sprintf("Set enable_cdi = true in %s of %s, then %s.", section, rt.configPath, restart)
		return r
	}
	if missing := missingDirs(e.h.CDIDirs, dirs); len(missing) > 0 {
		r.Status = Fail
		r.Found = fmt.Sprintf("CDI on (%s), but it %s, not %s, where the driver's specs are expected", why, scan, strings.Join(missing, ", "))
		r.Fix = fmt.Sprintf("Add %s to cdi_spec_dirs in %s, then %s; or set the chart's cdiDir (and --cdi-dirs) to a directory it scans.",
			strings.Join(missing, ", "), section, restart)
		if rt.name == runtimeCRIO {
			r.Fix += " A --cdi-spec-dirs flag of crio overrides the file."
		}
		return r
	}
	r.Status, r.Found = OK, "CDI on ("+why+"), "+scan
	return r
}

// checkCDISpecDirs: the directories the driver writes specs to must be writable
// directories. A missing one is a warning: the kubelet plugin creates its own.
func checkCDISpecDirs(e *env) Result {
	r := Result{Check: CheckCDISpecDirs}
	if len(e.h.CDIDirs) == 0 {
		r.Status, r.Found = Skip, "no CDI spec directories given (--cdi-dirs)"
		return r
	}
	status := OK
	var found, fixes []string
	for _, d := range e.h.CDIDirs {
		st, err := os.Stat(d)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			status = Worst(status, Warn)
			found = append(found, d+" does not exist")
			fixes = appendOnce(fixes, "create missing ones with mkdir -p (the kubelet plugin creates its cdiDir when it starts, other CDI users may not)")
		case err != nil:
			status = Fail
			found = append(found, err.Error())
			fixes = append(fixes, "run as root")
		case !st.IsDir():
			status = Fail
			found = append(found, d+" is not a directory")
			fixes = append(fixes, "replace "+d+" with a directory")
		default:
			if err := e.h.Writable(d); err != nil {
				status = Fail
				found = append(found, d+" is not writable: "+err.Error())
				fixes = append(fixes, "make "+d+" writable (a read-only /etc: point cdiDir and the runtime's spec dirs at a writable directory such as /var/run/cdi)")
				continue
			}
			found = append(found, d+" is a writable directory")
		}
	}
	r.Status, r.Found = status, strings.Join(found, "; ")
	if status != OK {
		r.Fix = capitalize(strings.Join(fixes, "; ")) + "."
	}
	return r
}

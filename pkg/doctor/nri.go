package doctor

import (
	"fmt"
	"io/fs"
	"os"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// nriSetting is what a runtime's config says about NRI.
type nriSetting struct {
	on          *bool
	why         string
	unknown     string
	socket      string
	refuseConns bool
	section     string
	enableFix   string
	restart     string
}

func containerdNRISetting(e *env, rt *runtime) nriSetting {
	c := rt.cd
	s := nriSetting{socket: e.h.NRISocket, section: `[plugins."` + containerdNRI + `"]`, restart: "systemctl restart containerd"}
	s.enableFix = "set disable = false in " + s.section + " of " + rt.configPath
	s.unknown = "NRI is off by default in containerd 1.7 and on in 2.x, and neither the config nor the running binary tells which this is"
	yes, no := true, false
	disable, set := boolKey(c.nri, "disable")
	switch {
	case rt.ver.below(1, 7):
		s.on, s.why = &no, "containerd "+rt.ver.text+" has no NRI"
		s.enableFix = "upgrade containerd to 2.x"
	case set:
		on := !disable
		s.on, s.why = &on, fmt.Sprintf("disable = %v in %s", disable, c.nriFrom)
	case rt.ver.major >= 2:
		s.on, s.why = &yes, "the default of containerd 2.x"
	case rt.ver.major == 1:
		s.on, s.why = &no, "the default of containerd 1.7"
	case c.exists && c.version >= 3:
		s.on, s.why = &yes, "the default of containerd 2.x, which version 3 configs are for"
	}
	if p, ok := stringKey(c.nri, "socket_path"); ok && p != "" {
		s.socket = p
	}
	s.refuseConns, _ = boolKey(c.nri, "disable_connections")
	return s
}

func crioNRISetting(e *env, rt *runtime) nriSetting {
	t := rt.crio.table(crioNRITable)
	s := nriSetting{socket: e.h.NRISocket, section: "[crio.nri]", restart: "systemctl restart crio"}
	s.enableFix = "set enable_nri = true in " + s.section + " (a drop-in in " + rt.crio.dropIns + ")"
	s.unknown = "NRI is on by default from CRI-O 1.30 and off before, and the running binary does not tell which this is"
	yes, no := true, false
	enable, set := boolKey(t, "enable_nri")
	switch {
	case set:
		s.on, s.why = &enable, fmt.Sprintf("enable_nri = %v %s", enable, rt.crio.source(crioNRITable, "enable_nri"))
	case rt.ver.atLeast(1, 30):
		s.on, s.why = &yes, "the default of CRI-O 1.30 and later"
	case rt.ver.below(1, 30):
		s.on, s.why = &no, "the default of CRI-O before 1.30"
	}
	if p, ok := stringKey(t, "nri_listen"); ok && p != "" {
		s.socket = p
	}
	s.refuseConns, _ = boolKey(t, "nri_disable_connections")
	return s
}

// checkNRI: the driver's network attachment is an NRI plugin that connects to the
// runtime's NRI socket. Without it, claims that ask for attachment fail at prepare; in
// exclusive RDMA netns mode every claim does.
func checkNRI(e *env, rt *runtime) Result {
	r := Result{Check: rt.name + CheckNRISuffix}
	var s nriSetting
	if rt.name == runtimeContainerd {
		s = containerdNRISetting(e, rt)
	} else {
		s = crioNRISetting(e, rt)
	}
	severity, needs := Warn, "claims that ask for network attachment (network.mode other than none) fail at prepare"
	if e.inv != nil && e.inv.NetnsMode == discovery.NetnsModeExclusive {
		severity, needs = Fail, "the RDMA netns mode is exclusive, so every claim fails at prepare"
	}
	chart := "the chart's networkAttachment.nriSocket (default " + DefaultNRISocket + ") must name the same socket"
	switch {
	case s.on == nil:
		r.Status = Warn
		r.Found = s.unknown + "; without NRI, " + needs
		r.Fix = capitalize(s.enableFix) + ", then " + s.restart + "."
	case !*s.on:
		r.Status = severity
		r.Found = "NRI off (" + s.why + "): " + needs
		r.Fix = capitalize(s.enableFix) + ", then " + s.restart + "."
	case s.refuseConns:
		r.Status = severity
		r.Found = "NRI on (" + s.why + "), but it refuses plugins that connect to its socket, like the driver's: " + needs
		key := "disable_connections"
		if rt.name == runtimeCRIO {
			key = "nri_disable_connections"
		}
		r.Fix = fmt.Sprintf("Set %s = false in %s, then %s.", key, s.section, s.restart)
	default:
		st, err := os.Stat(s.socket)
		switch {
		case err == nil && st.Mode()&fs.ModeSocket != 0:
			r.Status = OK
			r.Found = "NRI on (" + s.why + "), socket " + s.socket
		case len(rt.procs) == 0:
			r.Status = Warn
			r.Found = "NRI on (" + s.why + "), socket " + s.socket + " absent: " + rt.name + " is not running"
			r.Fix = "Start " + rt.name + "; " + chart + "."
		default:
			r.Status = severity
			r.Found = "NRI on (" + s.why + "), but no socket at " + s.socket + ": " + needs
			r.Fix = capitalize(chart) + "; if " + rt.name + " was started before NRI was enabled, " + s.restart + "."
		}
	}
	return r
}

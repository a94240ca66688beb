// Package host inspects the machine the local cluster runs on: the cgroup version and
// driver, whether processes may lower their oom_score_adj, the node's address, the resolver
// configuration, the host packages the cluster needs, and kernel settings.
package host

import (
	"bufio"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Facts is what the local cluster adapts to.
type Facts struct {
	// CgroupV1 is true when /sys/fs/cgroup is not a cgroup2 mount (v1 or hybrid): the
	// kubelet then needs failCgroupV1: false.
	CgroupV1 bool
	// CgroupDriver is "systemd" when systemd is the init system, else "cgroupfs".
	CgroupDriver string
	// OOMScoreAdjLocked is true when a root process may not lower its oom_score_adj: runc
	// then needs the clamping wrapper and the kubelet and kube-proxy oomScoreAdj 0.
	OOMScoreAdjLocked bool
	NodeName          string
	NodeIP            net.IP
	// MTU of the interface of the default route; the pod bridge uses it.
	MTU int
	// ResolvConf is the resolver file the kubelet hands to pods.
	ResolvConf string
}

// Detect gathers the facts of this machine.
func Detect(ctx context.Context) (*Facts, error) {
	f := &Facts{CgroupDriver: "cgroupfs", ResolvConf: "/etc/resolv.conf"}
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("statfs /sys/fs/cgroup: %w", err)
	}
	f.CgroupV1 = st.Type != unix.CGROUP2_SUPER_MAGIC
	if fi, err := os.Stat("/run/systemd/system"); err == nil && fi.IsDir() {
		f.CgroupDriver = "systemd"
	}
	// A child shell tries; this process keeps its own score.
	err := exec.CommandContext(ctx, "/bin/sh", "-c", "echo -998 > /proc/self/oom_score_adj").Run()
	f.OOMScoreAdjLocked = err != nil

	name, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("hostname: %w", err)
	}
	f.NodeName = strings.ToLower(name)
	if f.NodeIP, f.MTU, err = defaultRoute(); err != nil {
		return nil, err
	}
	if data, err := os.ReadFile("/etc/resolv.conf"); err == nil && strings.Contains(string(data), "127.0.0.53") {
		if _, err := os.Stat("/run/systemd/resolve/resolv.conf"); err == nil {
			f.ResolvConf = "/run/systemd/resolve/resolv.conf"
		}
	}
	return f, nil
}

// LogValue summarises the facts for slog.
func (f *Facts) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Bool("cgroupV1", f.CgroupV1), slog.String("cgroupDriver", f.CgroupDriver),
		slog.Bool("oomScoreAdjLocked", f.OOMScoreAdjLocked), slog.String("node", f.NodeName),
		slog.String("nodeIP", f.NodeIP.String()), slog.Int("mtu", f.MTU), slog.String("resolvConf", f.ResolvConf))
}

// defaultRoute returns the first IPv4 address and the MTU of the interface that carries the
// default route, read from /proc/net/route.
func defaultRoute() (net.IP, int, error) {
	fh, err := os.Open("/proc/net/route")
	if err != nil {
		return nil, 0, fmt.Errorf("open /proc/net/route: %w", err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[1] != "00000000" {
			continue
		}
		ifc, err := net.InterfaceByName(fields[0])
		if err != nil {
			return nil, 0, fmt.Errorf("default route interface %s: %w", fields[0], err)
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, 0, fmt.Errorf("addresses of %s: %w", fields[0], err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.To4(), ifc.MTU, nil
			}
		}
		return nil, 0, fmt.Errorf("default route interface %s has no IPv4 address", fields[0])
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("read /proc/net/route: %w", err)
	}
	return nil, 0, errors.New("no default IPv4 route: the node needs an address other pods can reach")
}

// Requirement is a file the cluster needs on the host and the Debian package that has it.
type Requirement struct {
	Path    string
	Package string
}

// packagesFile is the list of the host's packages and the files of each that the cluster
// runs; .ci/run reads the same file.
//
//go:embed packages.txt
var packagesFile string

// Requirements lists what the cluster runs from the host, in the order of packages.txt.
var Requirements = mustparseRequirements(packagesFile)

// parseRequirements reads the format of packages.txt: one package a line, followed by
// the absolute paths of its files the cluster runs; blank lines and lines starting with
// # are skipped.
func parseRequirements(text string) ([]Requirement, error) {
	var out []Requirement
	for i, line := range strings.Split(text, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		if len(fields) < 2 {
			return nil, fmt.Errorf("line %d: package %s names no file", i+1, fields[0])
		}
		for _, p := range fields[1:] {
			if !filepath.IsAbs(p) {
				return nil, fmt.Errorf("line %d: package %s: file %q is not an absolute path", i+1, fields[0], p)
			}
			out = append(out, Requirement{Path: p, Package: fields[0]})
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no packages listed")
	}
	return out, nil
}

// mustparseRequirements parses the embedded list, which the tests check.
func mustparseRequirements(text string) []Requirement {
	r, err := parseRequirements(text)
	if err != nil {
		panic(fmt.Sprintf("packages.txt: %v", err))
	}
	return r
}

// EnsurePackages installs, with apt-get, the packages of the requirements that are missing.
func EnsurePackages(ctx context.Context, log *slog.Logger) error {
	seen := map[string]bool{}
	var missing []string
	for _, r := range Requirements {
		if _, err := os.Stat(r.Path); err == nil || seen[r.Package] {
			continue
		}
		seen[r.Package] = true
		missing = append(missing, r.Package)
	}
	if len(missing) == 0 {
		return nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil {
		return fmt.Errorf("missing host packages %v and no apt-get to install them", missing)
	}
	log.Info("installing host packages", "packages", missing)
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", args[0], err, out)
		}
	}
	return nil
}

// Sysctl is a kernel setting and the value the cluster needs.
type Sysctl struct{ Key, Value string }

// Sysctls are set on cluster-up; their previous values are restored on cluster-down.
var Sysctls = []Sysctl{
	{"net/ipv4/ip_forward", "1"},
	{"net/bridge/bridge-nf-call-iptables", "1"},
}

// SetSysctls applies Sysctls and returns the previous values of the ones it changed.
func SetSysctls() (map[string]string, error) {
	prev := map[string]string{}
	for _, s := range Sysctls {
		p := filepath.Join("/proc/sys", s.Key)
		old, err := os.ReadFile(p)
		if err != nil {
			return prev, fmt.Errorf("read sysctl %s (is the module loaded?): %w", s.Key, err)
		}
		if strings.TrimSpace(string(old)) == s.Value {
			continue
		}
		if err := os.WriteFile(p, []byte(s.Value), 0o644); err != nil {
			return prev, fmt.Errorf("set sysctl %s=%s: %w", s.Key, s.Value, err)
		}
		prev[s.Key] = strings.TrimSpace(string(old))
	}
	return prev, nil
}

// RestoreSysctls writes back values returned by SetSysctls.
func RestoreSysctls(prev map[string]string) error {
	var errs []error
	for k, v := range prev {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

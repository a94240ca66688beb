package localcluster

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// Fixed paths of the kubelet outside its root directory.
const (
	// devicePluginDir is where the kubelet serves device-plugin registration.
	devicePluginDir = "/var/lib/kubelet/device-plugins"
	// containerLogDir is where the kubelet links container logs.
	containerLogDir = "/var/log/containers"
)

// stopOrder is the reverse of the start order, with kube-proxy and the kubelet first so
// nothing restarts pods while they are being removed.
var stopOrder = []string{"kube-proxy", "kubelet", "containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"}

// Down stops what Up started and removes the cluster's state; logs stay. It is idempotent
// and goes on past errors, returning them all at the end.
func (c *Cluster) Down(ctx context.Context) error {
	l, log := c.Layout, c.Log
	if err := CheckHost(); err != nil {
		return err
	}
	var errs []error
	note := func(err error) {
		if err != nil {
			log.Warn("cluster-down", "err", err)
			errs = append(errs, err)
		}
	}
	c.stopComponents(ctx, note)
	c.killLeftoverShims()
	note(removePodCgroups())
	// After the pods: a stand-in moved into a pod is back in the host (or gone with its
	// namespace) once the pod is.
	note(c.removeMockNetdevs())
	note(c.cleanupKubeProxy(ctx))
	cleanupKubeletIptables(ctx)
	note(unmountUnder([]string{StateRoot, RunRoot, l.Out}))
	note(deleteBridge(ctx))
	note(restoreSysctls(l))
	removeHostLeftovers(l)
	removeContainerLogLinks(containerLogDir, l.PodLogs())
	// State, but not the logs and not the binary cache.
	for _, p := range l.statePaths() {
		if err := os.RemoveAll(p); err != nil {
			note(fmt.Errorf("remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// stopComponents stops the processes in stopOrder, and before containerd the pods it
// runs, through the CRI while containerd still runs.
func (c *Cluster) stopComponents(ctx context.Context, note func(error)) {
	l, log := c.Layout, c.Log
	for _, name := range stopOrder {
		if name == "containerd" {
			// Pods first, through the CRI, while containerd still runs.
			if r, err := readPidFile(l.PidFile("containerd")); err == nil && r.alive() {
				note(removeAllPods(ctx, l, log))
			}
		}
		stopped, err := stopProcess(l, name, 20*time.Second)
		note(err)
		if stopped {
			log.Info("stopped", "component", name)
		}
	}
}

// killLeftoverShims kills the shims of our containerd: they detach from it and run our
// shim binary.
func (c *Cluster) killLeftoverShims() {
	if c.Bins == nil {
		return
	}
	for _, pid := range processesOf(c.Bins.Containerd.Path("containerd-shim-runc-v2")) {
		c.Log.Info("stopping leftover shim", "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// cleanupKubeProxy removes kube-proxy's iptables rules, which outlive it.
func (c *Cluster) cleanupKubeProxy(ctx context.Context) error {
	if c.Bins == nil {
		return nil
	}
	proxy := c.Bins.Kubernetes.Path("kube-proxy")
	if !exists(proxy) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, proxy, "--cleanup").CombinedOutput(); err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %w: %s", err, out)
	}
	return nil
}

// deleteBridge deletes the pods' bridge, if it is there.
func deleteBridge(ctx context.Context) error {
	if !exists("/sys/class/net/" + BridgeName) {
		return nil
	}
	if out, err := exec.CommandContext(ctx, "ip", "link", "delete", BridgeName).CombinedOutput(); err != nil {
		return fmt.Errorf("delete bridge %s: %w: %s", BridgeName, err, out)
	}
	return nil
}

// restoreSysctls sets the sysctls Up changed back to the values it recorded; without a
// record there is nothing to restore.
func restoreSysctls(l Layout) error {
	if !exists(l.SysctlFile()) {
		return nil
	}
	data, err := os.ReadFile(l.SysctlFile())
	if err != nil {
		return fmt.Errorf("read the sysctls to restore: %w", err)
	}
	var prev map[string]string
	if err := json.Unmarshal(data, &prev); err != nil {
		return fmt.Errorf("decode %s: %w", l.SysctlFile(), err)
	}
	return host.RestoreSysctls(prev)
}

// exists reports whether path can be stat'ed: a missing kube-proxy or bridge leaves
// nothing to clean up.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// removeHostLeftovers removes, best effort, what the cluster leaves at fixed paths of the
// host outside its own directories.
func removeHostLeftovers(l Layout) {
	_ = os.Remove(l.SmokeCDISpec())
	// The driver's transient CDI specs: claims that were still prepared when the cluster went
	// away (the plugin keeps them on uninstall for a reinstall; this cluster's state is gone).
	if specs, err := filepath.Glob(DriverCDISpecGlob); err == nil {
		for _, f := range specs {
			_ = os.Remove(f)
		}
	}
	// The kubelet keeps device plugins at a fixed path outside its root dir: remove what it
	// and the smoke test put there, and the directories if that leaves them empty.
	for _, p := range []string{"kubelet.sock", "kubelet_internal_checkpoint", "localcluster-smoke.sock"} {
		_ = os.Remove(filepath.Join(devicePluginDir, p))
	}
	_ = os.Remove(devicePluginDir)
	_ = os.Remove(filepath.Dir(devicePluginDir))
	// Directories containerd and its shims use at fixed paths, if nothing else uses them.
	for _, d := range []string{"/run/containerd/s", "/run/containerd/fifo", "/run/containerd/runc/k8s.io", "/run/containerd/runc", "/run/containerd"} {
		_ = os.Remove(d)
	}
}

// removeContainerLogLinks removes the links the kubelet made in dir (the fixed
// /var/log/containers) to the pod logs under podLogs, and dir if that leaves it empty;
// links of anything else stay.
func removeContainerLogLinks(dir, podLogs string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if t, err := os.Readlink(p); err == nil && strings.HasPrefix(t, podLogs+"/") {
			_ = os.Remove(p)
		}
	}
	_ = os.Remove(dir)
}

// cleanupKubeletIptables removes the chains the kubelet creates (kube-proxy --cleanup
// removes kube-proxy's). Rules that are not there are fine: every step is best effort.
func cleanupKubeletIptables(ctx context.Context) {
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(ipt); err != nil {
			continue
		}
		run := func(args ...string) { _ = exec.CommandContext(ctx, ipt, append([]string{"-w"}, args...)...).Run() }
		run("-t", "filter", "-D", "INPUT", "-j", "KUBE-FIREWALL")
		run("-t", "filter", "-D", "OUTPUT", "-j", "KUBE-FIREWALL")
		run("-t", "filter", "-F", "KUBE-FIREWALL")
		run("-t", "filter", "-X", "KUBE-FIREWALL")
		for _, t := range []string{"mangle", "nat", "filter"} {
			run("-t", t, "-F", "KUBE-KUBELET-CANARY")
			run("-t", t, "-X", "KUBE-KUBELET-CANARY")
		}
		run("-t", "mangle", "-X", "KUBE-IPTABLES-HINT")
	}
}

// unmountUnder unmounts every mount point below the given directories, deepest first, and
// detaches the ones that are busy.
func unmountUnder(dirs []string) error {
	fh, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	defer fh.Close()
	var points []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if mp == d || strings.HasPrefix(mp, strings.TrimSuffix(d, "/")+"/") {
				points = append(points, mp)
				break
			}
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read mounts: %w", err)
	}
	// Deepest first; a path mounted twice appears twice and is unmounted twice.
	sort.Slice(points, func(i, j int) bool { return strings.Count(points[i], "/") > strings.Count(points[j], "/") })
	var errs []error
	for _, mp := range points {
		if err := syscall.Unmount(mp, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
				errs = append(errs, fmt.Errorf("unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes the octal escapes (\040 for a space) of /proc/self/mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// statusReport is the state of each process of the cluster.
type statusReport struct {
	rows    [][2]string
	running int
}

func (c *Cluster) status() statusReport {
	var st statusReport
	for i := len(stopOrder) - 1; i >= 0; i-- {
		name := stopOrder[i]
		state := "stopped"
		if r, err := readPidFile(c.Layout.PidFile(name)); err == nil {
			if r.alive() {
				state = fmt.Sprintf("running (pid %d)", r.Pid)
				st.running++
			} else {
				state = fmt.Sprintf("dead (pid %d; see %s)", r.Pid, c.Layout.LogFile(name))
			}
		}
		st.rows = append(st.rows, [2]string{name, state})
	}
	return st
}

// whole is true when every process runs, false when none does, and an error when only
// some do.
func (st statusReport) whole() (bool, error) {
	switch {
	case st.running > 0 && st.running == len(st.rows):
		return true, nil
	case st.running > 0:
		return false, fmt.Errorf("cluster partly running (%d of %d processes); run make cluster-down first", st.running, len(st.rows))
	}
	return false, nil
}

// Status prints each process's state and, when the API server runs, the node.
func (c *Cluster) Status(ctx context.Context) error {
	st := c.status()
	for _, r := range st.rows {
		fmt.Printf("%-24s %s\n", r[0], r[1])
	}
	if st.running == 0 {
		fmt.Println("The local cluster is down.")
		return nil
	}
	if out, err := c.kubectl(ctx, "get", "nodes", "-o", "wide"); err == nil {
		fmt.Print("\n" + out)
	}
	fmt.Printf("\nexport KUBECONFIG=%s\n", c.Layout.Kubeconfig())
	if st.running != len(st.rows) {
		return fmt.Errorf("%d of %d processes run; logs in %s", st.running, len(st.rows), c.Layout.Logs())
	}
	return nil
}

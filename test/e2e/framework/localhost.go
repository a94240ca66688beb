package framework

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode/mocknet"
)

// localHookDir is where the plugin installs its hook on the local cluster (the cluster
// tool's localcluster.HookInstallDir, which its chart values name).
const localHookDir = "/var/lib/rdma-dra-local/rdma-dra/bin"

// pluginBinary is the plugin's command line inside its image.
const pluginBinary = "/usr/bin/rdma-dra-kubeletplugin"

// LocalHost is the host of the local cluster (docs/local-cluster.md): the suite's own
// machine, where the suite runs as root in the host's namespaces. It knows the node's
// paths and tools from the env file that `make cluster-up` writes.
type LocalHost struct {
	repo  string
	vars  map[string]string
	paths NodePaths
}

var _ Host = (*LocalHost)(nil)

// newLocalHost is the local cluster's host as its env file (vars) describes it.
func newLocalHost(repo string, vars map[string]string) *LocalHost {
	return &LocalHost{repo: repo, vars: vars, paths: NodePaths{
		KubeletDir:         vars["LOCALCLUSTER_KUBELET_DIR"],
		CDIDir:             vars["LOCALCLUSTER_CDI_DIR"],
		HookDir:            localHookDir,
		DeviceMetadataRoot: vars["LOCALCLUSTER_DEVICE_METADATA_ROOT"],
		SysRoot:            vars["LOCALCLUSTER_MOCK_SYS"],
		DevRoot:            vars["LOCALCLUSTER_MOCK_DEV"],
		ContainerdConfig:   filepath.Join(repo, "_output", "local-cluster", "config", "containerd.toml"),
	}}
}

// Paths implements Host.
func (h *LocalHost) Paths() NodePaths { return h.paths }

// ReadFile implements Host.
func (h *LocalHost) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

// ReadDir implements Host.
func (h *LocalHost) ReadDir(path string) ([]fs.DirEntry, error) { return os.ReadDir(path) }

// Lstat implements Host.
func (h *LocalHost) Lstat(path string) (fs.FileInfo, error) { return os.Lstat(path) }

// Readlink implements Host.
func (h *LocalHost) Readlink(path string) (string, error) { return os.Readlink(path) }

// WriteFile implements Host, atomically: a reader (the plugin) sees the old content or
// the new. A file that does not exist yet is written into its directory's resolved path.
func (h *LocalHost) WriteFile(path string, data []byte) error {
	resolved, err := filepath.EvalSymlinks(path)
	if errors.Is(err, fs.ErrNotExist) {
		var dir string
		if dir, err = filepath.EvalSymlinks(filepath.Dir(path)); err == nil {
			resolved = filepath.Join(dir, filepath.Base(path))
		}
	}
	if err != nil {
		return fmt.Errorf("resolve %s: %w", path, err)
	}
	return atomicfile.WriteFile(resolved, data, 0o644)
}

// Remove implements Host.
func (h *LocalHost) Remove(path string) error { return os.Remove(path) }

// PluginPID implements Host: the process in /proc whose command line is the plugin's
// alone and whose environment has the POD_UID the chart gives it. Right after a rollout
// the previous pod's process may still be shutting down next to it, so the command line
// alone is not enough.
func (h *LocalHost) PluginPID(podUID string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		// The plugin itself, not its readiness probe (`rdma-dra-kubeletplugin ready`, which
		// runs in the same container with the same environment every 2 seconds).
		if argv := strings.Split(strings.TrimSuffix(string(cmd), "\x00"), "\x00"); len(argv) != 1 || argv[0] != pluginBinary {
			continue
		}
		environ, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if slices.Contains(strings.Split(string(environ), "\x00"), "POD_UID="+podUID) {
			pids = append(pids, pid)
		}
	}
	if len(pids) != 1 {
		return 0, fmt.Errorf("found %d processes of plugin pod %s %v, want 1", len(pids), podUID, pids)
	}
	return pids[0], nil
}

// Kill implements Host.
func (h *LocalHost) Kill(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// RestartKubelet implements Host with the cluster tool (`localcluster restart kubelet`).
func (h *LocalHost) RestartKubelet(ctx context.Context) error {
	_, err := h.clusterTool(ctx, "restart", "kubelet")
	return err
}

// UseMockProfile implements Host with the cluster tool (`localcluster fixture`).
func (h *LocalHost) UseMockProfile(ctx context.Context, profile string) error {
	_, err := h.clusterTool(ctx, "fixture", profile)
	return err
}

// ImportImage implements Host with the cluster tool (`localcluster import`).
func (h *LocalHost) ImportImage(ctx context.Context, archive string) error {
	_, err := h.clusterTool(ctx, "import", archive)
	return err
}

// TagImage implements Host with the cluster's ctr.
func (h *LocalHost) TagImage(ctx context.Context, ref, newRef string) error {
	_, err := h.ctr(ctx, "images", "tag", "--force", ref, newRef)
	return err
}

// RemoveImage implements Host with the cluster's ctr.
func (h *LocalHost) RemoveImage(ctx context.Context, ref string) error {
	_, err := h.ctr(ctx, "images", "rm", ref)
	return err
}

// GetLoopback implements Host: the suite runs in the host's network namespace, so the
// node's loopback is its own.
func (h *LocalHost) GetLoopback(ctx context.Context, port int, path string) ([]byte, error) {
	url := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + path
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("get %s: %s", url, resp.Status)
	}
	return body, nil
}

// Links implements Host: the suite runs in the host's network namespace.
func (h *LocalHost) Links() ([]HostLink, error) { return hostLinks() }

// MockNetdevs implements Host: the cluster tool's record of the stand-ins it made.
func (h *LocalHost) MockNetdevs() ([]MockNetdev, error) {
	path := h.vars["LOCALCLUSTER_MOCK_NETDEVS"]
	if path == "" {
		return nil, errors.New("the cluster's env file has no LOCALCLUSTER_MOCK_NETDEVS: the cluster predates mock netdevs; make cluster-down cluster-up")
	}
	rec, err := mocknet.ReadRecord(path)
	if err != nil {
		return nil, err
	}
	if len(rec.Links) == 0 {
		return nil, fmt.Errorf("%s records no mock netdevs", path)
	}
	out := make([]MockNetdev, 0, len(rec.Links))
	for _, l := range rec.Links {
		out = append(out, MockNetdev{Name: l.Name, HardwareAddr: l.HardwareAddr, MTU: l.MTU, Addresses: l.Addresses})
	}
	return out, nil
}

// clusterTool runs the local cluster tool (restart, import, ...).
func (h *LocalHost) clusterTool(ctx context.Context, args ...string) (string, error) {
	return runIn(ctx, h.repo, filepath.Join(h.repo, "_output", "cluster-cache", "tools", "localcluster"), append([]string{"-repo", h.repo}, args...)...)
}

// ctr runs the cluster's ctr in containerd's k8s.io namespace.
func (h *LocalHost) ctr(ctx context.Context, args ...string) (string, error) {
	return runIn(ctx, h.repo, h.vars["LOCALCLUSTER_CTR"], append([]string{"--address", h.vars["LOCALCLUSTER_CONTAINERD_SOCKET"], "-n", "k8s.io"}, args...)...)
}

// hostLinks returns the interfaces of the suite's network namespace, sorted by name,
// without the pod network's veths (their names are random and come and go with the
// cluster's own pods) and without link-local addresses (the kernel makes those wherever a
// link is).
func hostLinks() ([]HostLink, error) {
	ifcs, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("host interfaces: %w", err)
	}
	var out []HostLink
	for _, ifc := range ifcs {
		if strings.HasPrefix(ifc.Name, "veth") {
			continue
		}
		hl := HostLink{Name: ifc.Name, HardwareAddr: ifc.HardwareAddr.String(), MTU: ifc.MTU, Up: ifc.Flags&net.FlagUp != 0}
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && !n.IP.IsLinkLocalUnicast() {
				ones, _ := n.Mask.Size()
				hl.Addresses = append(hl.Addresses, fmt.Sprintf("%s/%d", n.IP, ones))
			}
		}
		slices.Sort(hl.Addresses)
		out = append(out, hl)
	}
	slices.SortFunc(out, func(a, b HostLink) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// runIn runs bin in dir and returns its output (stdout and stderr together); a failure
// names the command and quotes the output.
func runIn(ctx context.Context, dir, bin string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

package bench

import (
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"

	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// buildPlugin builds the kubelet plugin and its memlock hook into binDir, the way `make
// build` does, and returns the plugin's path and what it was built from. It builds the
// working tree; when that does not compile (someone is in the middle of a change), it
// builds the last commit instead, exported below srcDir.
func buildPlugin(ctx context.Context, repo, binDir, srcDir string) (path, source string, err error) {
	wtErr := goBuildPlugin(ctx, repo, binDir)
	if wtErr == nil {
		return filepath.Join(binDir, "rdma-dra-kubeletplugin"), "working tree", nil
	}
	klog.FromContext(ctx).Error(wtErr, "The working tree does not build, benchmarking the last commit")
	_ = os.RemoveAll(srcDir)
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		return "", "", fmt.Errorf("create %s: %w", srcDir, err)
	}
	export := exec.CommandContext(ctx, "sh", "-c", `git -C "$1" archive HEAD | tar -x -C "$2"`, "sh", repo, srcDir)
	if out, err := export.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("export HEAD: %w\n%s", err, out)
	}
	if err := goBuildPlugin(ctx, srcDir, binDir); err != nil {
		return "", "", fmt.Errorf("working tree: %w; HEAD: %w", wtErr, err)
	}
	return filepath.Join(binDir, "rdma-dra-kubeletplugin"), "HEAD " + GitCommit(repo) + " (the working tree did not build)", nil
}

func goBuildPlugin(ctx context.Context, dir, binDir string) error {
	for _, b := range []string{"rdma-dra-kubeletplugin", "rdma-dra-cdi-hook"} {
		cmd := exec.CommandContext(ctx, controlplane.GoCommand(), "build", "-trimpath", "-o", filepath.Join(binDir, b), "./cmd/"+b)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %w\n%s", b, err, out)
		}
	}
	return nil
}

// PluginOptions start one plugin process for one mock node.
type PluginOptions struct {
	// Binary is the rdma-dra-kubeletplugin executable.
	Binary string
	// Dir holds the node tree and the plugin's directories.
	Dir string
	// CDIDir is the CDI spec directory; a tmpfs like a node's /var/run/cdi.
	CDIDir string
	// MetadataRoot is the plugin's --device-metadata-root; a tmpfs like a node's /var/run.
	MetadataRoot string
	// NodeName is the node's name; the pool is NodeName-rdma.
	NodeName string
	// Ports is the size of the mock node (scaledNode).
	Ports int
	// Kubeconfig is the plugin's kubeconfig.
	Kubeconfig string
	// RescanInterval overrides the plugin's default when not zero.
	RescanInterval time.Duration
	// LogFile receives the plugin's output.
	LogFile string
	// MetricsAddress, when set, is where the plugin serves /metrics (host:port).
	MetricsAddress string
}

// Plugin is a running rdma-dra-kubeletplugin.
type Plugin struct {
	Opts PluginOptions
	// SysRoot is the mock node's sysfs root.
	SysRoot string
	// Socket is the DRA gRPC socket the kubelet would call.
	Socket string
	proc   *controlplane.Process
}

// startPlugin writes the mock node, starts the plugin against it and waits until its
// DRA socket exists and its ResourceSlices are in the API server.
func startPlugin(ctx context.Context, kube kubernetes.Interface, o PluginOptions) (*Plugin, error) {
	nodeDir := filepath.Join(o.Dir, "node")
	sysRoot, err := writeScaledNode(nodeDir, o.Ports)
	if err != nil {
		return nil, err
	}
	devRoot := filepath.Join(nodeDir, "dev")
	if err := touchCharDevs(filepath.Join(nodeDir, mocknode.CharDevsFile), devRoot); err != nil {
		return nil, err
	}
	plugins := filepath.Join(o.Dir, "plugins")
	registry := filepath.Join(o.Dir, "plugins_registry")
	// The kubelet creates its registration directory; the plugin expects it.
	if err := os.MkdirAll(registry, 0o750); err != nil {
		return nil, fmt.Errorf("create registration directory: %w", err)
	}
	args := []string{
		"--node-name=" + o.NodeName, "--sysfs-root=" + sysRoot, "--dev-root=" + devRoot,
		"--cdi-root=" + o.CDIDir, "--device-metadata-root=" + o.MetadataRoot,
		"--kubelet-registrar-directory-path=" + registry,
		"--kubelet-plugins-directory-path=" + plugins,
		"--hook-install-dir=" + filepath.Join(o.Dir, "hook"),
		"--healthcheck-port=-1", "--kubeconfig=" + o.Kubeconfig,
	}
	if o.RescanInterval > 0 {
		args = append(args, "--rescan-interval="+o.RescanInterval.String())
	}
	if o.MetricsAddress != "" {
		args = append(args, "--metrics-address="+o.MetricsAddress)
	}
	proc, err := controlplane.StartProcess(ctx, "rdma-dra-kubeletplugin", o.LogFile, o.Binary, args...)
	if err != nil {
		return nil, err
	}
	p := &Plugin{Opts: o, SysRoot: sysRoot, Socket: filepath.Join(plugins, devicemodel.DefaultDriverName, "dra.sock"), proc: proc}
	// Ready means serving and the whole pool in the API server: the measurements that
	// follow read the pool's devices at once.
	var notReady error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		if proc.Exited() {
			return false, fmt.Errorf("plugin for %s exited: %v; see %s", o.NodeName, proc.Err(), o.LogFile)
		}
		if _, notReady = os.Stat(p.Socket); notReady != nil {
			return false, nil
		}
		slices, err := nodeSlices(ctx, kube, o.NodeName)
		if err != nil {
			notReady = err
			return false, nil
		}
		devices, err := completePool(slices, devicemodel.DefaultDriverName, p.Pool())
		if err == nil && len(devices) == 0 {
			err = fmt.Errorf("pool %s has no devices", p.Pool())
		}
		notReady = err
		return err == nil, nil
	})
	if err != nil {
		p.Stop(ctx)
		return nil, fmt.Errorf("plugin for %s not ready: %w (last: %v); see %s", o.NodeName, err, notReady, o.LogFile)
	}
	klog.FromContext(ctx).Info("Plugin is running", "node", o.NodeName, "pid", proc.Pid(), "ports", o.Ports)
	return p, nil
}

// Pool is the plugin's pool name.
func (p *Plugin) Pool() string { return p.Opts.NodeName + devicemodel.PoolSuffix }

// Pid is the plugin's process ID.
func (p *Plugin) Pid() int { return p.proc.Pid() }

// Stop stops the plugin.
func (p *Plugin) Stop(ctx context.Context) { p.proc.Stop(ctx, 10*time.Second) }

// completePool returns the devices of the driver's pool once slices hold all of it, in slice name
// order: every slice of the pool's newest generation is there, as many as that
// generation says the pool has. Slices of older generations are left out, as the
// scheduler leaves them out. A pool is never judged by "some slices exist": the
// resourceslice controller creates a pool's slices one request at a time, and the device
// model puts the counter slices first (devicemodel's pack), so for a moment a node has a
// slice and no device at all.
func completePool(slices []resourceapi.ResourceSlice, driver, pool string) ([]resourceapi.Device, error) {
	var newest []*resourceapi.ResourceSlice
	for i := range slices {
		s := &slices[i]
		switch {
		case s.Spec.Driver != driver || s.Spec.Pool.Name != pool:
		case len(newest) == 0 || s.Spec.Pool.Generation > newest[0].Spec.Pool.Generation:
			newest = []*resourceapi.ResourceSlice{s}
		case s.Spec.Pool.Generation == newest[0].Spec.Pool.Generation:
			newest = append(newest, s)
		}
	}
	if len(newest) == 0 {
		return nil, fmt.Errorf("pool %s not published", pool)
	}
	gen, want := newest[0].Spec.Pool.Generation, newest[0].Spec.Pool.ResourceSliceCount
	if int64(len(newest)) != want {
		return nil, fmt.Errorf("pool %s generation %d: %d of %d slices published", pool, gen, len(newest), want)
	}
	sort.Slice(newest, func(i, j int) bool { return newest[i].Name < newest[j].Name })
	var devices []resourceapi.Device
	for _, s := range newest {
		if s.Spec.Pool.ResourceSliceCount != want {
			return nil, fmt.Errorf("pool %s generation %d: slices disagree on the slice count (%d, %d)", pool, gen, want, s.Spec.Pool.ResourceSliceCount)
		}
		devices = append(devices, s.Spec.Devices...)
	}
	return devices, nil
}

// nodeSlices lists the ResourceSlices of one node.
func nodeSlices(ctx context.Context, kube kubernetes.Interface, node string) ([]resourceapi.ResourceSlice, error) {
	list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, node).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("list slices of %s: %w", node, err)
	}
	return list.Items, nil
}

// touchCharDevs creates an empty file for every character device the mock node lists
// (lines "/dev/infiniband/uverbs0 c 231 192"), below devRoot: the CDI writer checks that
// the optional nodes exist, as on a real host. Real device nodes would need mknod.
func touchCharDevs(list, devRoot string) error {
	f, err := os.Open(list)
	if err != nil {
		return fmt.Errorf("open chardevs list: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		path := filepath.Join(devRoot, strings.TrimPrefix(fields[0], "/dev/"))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
		}
		if err := os.WriteFile(path, nil, 0o644); err != nil {
			return fmt.Errorf("create %s: %w", path, err)
		}
	}
	return sc.Err()
}

// rssMiB reads the resident set size of a process from /proc/<pid>/status (VmRSS).
func rssMiB(pid int) (float64, error) { return ProcStatusMiB(pid, "VmRSS") }

// ProcStatusMiB reads a kB field of /proc/<pid>/status (VmRSS, VmHWM, ...) in MiB.
func ProcStatusMiB(pid int, field string) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")))
			if err != nil {
				return 0, fmt.Errorf("parse %s of pid %d: %w", field, pid, err)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

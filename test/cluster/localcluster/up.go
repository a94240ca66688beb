package localcluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// Cluster ties the layout, the binaries and the logger together.
type Cluster struct {
	Layout Layout
	Bins   *bincache.Cache
	Log    *slog.Logger
	// Go is the go command, used to write the default fixture.
	Go string
}

// CheckHost refuses to run anywhere but on Linux as root.
func CheckHost() error {
	if runtime.GOOS != "linux" {
		return fmt.Errorf("the local cluster runs on Linux only, not %s", runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return errors.New("the local cluster must run as root (it starts the kubelet and containerd, mounts, and changes iptables); use sudo make cluster-up")
	}
	return nil
}

// Up starts the cluster, waits for the node to be Ready and runs the smoke test.
func (c *Cluster) Up(ctx context.Context, o Options) error {
	start := time.Now()
	l, log := c.Layout, c.Log
	if err := CheckHost(); err != nil {
		return err
	}
	if up, err := c.alreadyUp(); up || err != nil {
		return err
	}
	gates, err := featureGateMap(o.FeatureGates)
	if err != nil {
		return err
	}
	if err := host.EnsurePackages(ctx, log); err != nil {
		return err
	}
	facts, err := host.Detect(ctx)
	if err != nil {
		return err
	}
	log.Info("host", "facts", facts)
	// A fresh state every time: leftovers of a crashed run go first.
	if err := c.Down(ctx); err != nil {
		return fmt.Errorf("clean up before start: %w", err)
	}
	if err := createDirs(l); err != nil {
		return err
	}
	if err := rotateLogs(l); err != nil {
		return err
	}
	runc := c.quirks(facts)
	if err := writePKI(l, facts); err != nil {
		return err
	}
	if err := writeConfigs(l, facts, gates, runc); err != nil {
		return err
	}
	if err := c.setupFixture(ctx, o); err != nil {
		return err
	}
	if err := c.setupMockNetdevs(ctx, facts); err != nil {
		return err
	}
	if err := shareNetnsDir(l.NetnsDir()); err != nil {
		return err
	}
	if err := setSysctls(l); err != nil {
		return err
	}
	if err := c.startComponents(ctx, facts, o); err != nil {
		return err
	}
	if err := c.waitNodeReady(ctx, facts.NodeName); err != nil {
		return err
	}
	if err := c.writeEnv(facts); err != nil {
		return err
	}
	log.Info("node ready", "node", facts.NodeName, "took", time.Since(start).Round(time.Second).String())
	if !o.SkipSmoke {
		if err := c.Smoke(ctx); err != nil {
			return fmt.Errorf("smoke test: %w", err)
		}
	}
	log.Info("cluster up", "took", time.Since(start).Round(time.Second).String())
	c.printUsage()
	return nil
}

// alreadyUp is true when every process of the cluster runs, of the Kubernetes build asked
// for; then Up has nothing to do. A partly running cluster is an error.
func (c *Cluster) alreadyUp() (bool, error) {
	up, err := c.status().whole()
	if !up || err != nil {
		return false, err
	}
	if err := c.checkRunningVersion(); err != nil {
		return false, err
	}
	c.Log.Info("cluster already up; run make cluster-down first for a fresh one")
	c.printUsage()
	return true, nil
}

// createDirs creates the directories of the output and of the runtime state.
func createDirs(l Layout) error {
	for _, d := range []string{l.Out, l.Logs(), l.Config(), StateRoot, RunRoot, l.Pids(), l.PodLogs(), l.CNIDataDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	return nil
}

// quirks logs how the cluster works around what this host does differently and returns
// the runc binary containerd runs.
func (c *Cluster) quirks(f *host.Facts) string {
	runc := runcBinary(f, c.Bins)
	if f.OOMScoreAdjLocked {
		c.Log.Info("quirk: this host refuses to lower oom_score_adj; runc runs through a wrapper that clamps negative values to 0", "wrapper", runc)
	}
	if f.CgroupV1 {
		c.Log.Info("quirk: cgroup v1 host; the kubelet runs with failCgroupV1: false")
	}
	return runc
}

// runcBinary is the host's runc, or the wrapper that clamps oom_score_adj where the host
// refuses to lower it.
func runcBinary(f *host.Facts, bins *bincache.Cache) string {
	if f.OOMScoreAdjLocked {
		return bins.Helpers.Path("runc-oomclamp")
	}
	return "/usr/sbin/runc"
}

// setSysctls sets the sysctls the cluster needs and records their previous values for
// Down; a record that cannot be written is not an error.
func setSysctls(l Layout) error {
	prev, err := host.SetSysctls()
	if err != nil {
		return err
	}
	if data, err := json.Marshal(prev); err == nil {
		_ = os.WriteFile(l.SysctlFile(), data, 0o644)
	}
	return nil
}

// startComponents starts each component in order and waits until it is ready; once
// containerd is, the cluster's images are imported into it.
func (c *Cluster) startComponents(ctx context.Context, f *host.Facts, o Options) error {
	comps, err := components(c.Layout, f, c.Bins, o)
	if err != nil {
		return err
	}
	for _, comp := range comps {
		if err := c.startComponent(ctx, comp); err != nil {
			return err
		}
		if comp.name == "containerd" {
			if err := importImages(ctx, c.Layout, c.Bins); err != nil {
				return err
			}
			c.Log.Info("imported images", "images", []string{PauseImage, ToolboxImage})
		}
	}
	return nil
}

// startComponent starts one component and waits until it is ready, or dead.
func (c *Cluster) startComponent(ctx context.Context, comp component) error {
	t0 := time.Now()
	r, err := startProcess(c.Layout, comp.name, comp.argv, comp.env)
	if err != nil {
		return err
	}
	if err := controlplane.WaitFor(ctx, comp.name, 3*time.Minute, r.alive, comp.ready); err != nil {
		return fmt.Errorf("%w (log: %s)", err, c.Layout.LogFile(comp.name))
	}
	c.Log.Info("started", "component", comp.name, "pid", r.Pid, "took", time.Since(t0).Round(100*time.Millisecond).String())
	return nil
}

// checkRunningVersion refuses a running cluster whose API server is another Kubernetes
// build than the one asked for (KUBE_VERSION): tests of one version must not run against
// another.
func (c *Cluster) checkRunningVersion() error {
	r, err := readPidFile(c.Layout.PidFile("kube-apiserver"))
	if err != nil {
		return fmt.Errorf("read the API server's pid file: %w", err)
	}
	running, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", r.Pid))
	if err != nil {
		return fmt.Errorf("find the running API server's binary: %w", err)
	}
	want := c.Bins.Kubernetes.Path("kube-apiserver")
	if abs, err := filepath.Abs(want); err == nil {
		want = abs
	}
	if running != want {
		return fmt.Errorf("the running cluster's API server is %s, not Kubernetes %s (%s): make cluster-down first", running, c.Bins.Kubernetes.Version, want)
	}
	return nil
}

// rotateLogs keeps the previous run's logs as *.log.1.
func rotateLogs(l Layout) error {
	matches, _ := filepath.Glob(filepath.Join(l.Logs(), "*.log"))
	for _, m := range matches {
		if err := os.Rename(m, m+".1"); err != nil {
			return fmt.Errorf("rotate %s: %w", m, err)
		}
	}
	return nil
}

// setupFixture writes the default mock node (unless a fixture is given) and links it to
// MockRoot.
func (c *Cluster) setupFixture(ctx context.Context, o Options) error {
	l, log := c.Layout, c.Log
	dir := o.Fixture
	if dir == "" {
		dir = l.DefaultFixture()
		cmd := exec.CommandContext(ctx, c.Go, "run", "./cmd/rdma-dra", "mock-node", "--profile", o.MockProfile,
			"--out", dir, "--force", "--mknod")
		cmd.Dir = l.Repo
		if out, err := cmd.CombinedOutput(); err != nil {
			log.Warn("could not write the default mock node; the fixture stays empty", "profile", o.MockProfile, "err", err, "output", strings.TrimSpace(string(out)))
			for _, d := range []string{"sys", "dev"} {
				if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
					return fmt.Errorf("create empty fixture: %w", err)
				}
			}
		} else {
			log.Info("wrote mock node", "profile", o.MockProfile, "dir", dir)
		}
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("fixture path %s: %w", dir, err)
	}
	if fi, err := os.Stat(filepath.Join(abs, "sys")); err != nil || !fi.IsDir() {
		return fmt.Errorf("fixture %s has no sys/ directory", abs)
	}
	_ = os.Remove(l.MockRoot())
	if err := os.Symlink(abs, l.MockRoot()); err != nil {
		return fmt.Errorf("link %s to the fixture: %w", l.MockRoot(), err)
	}
	return nil
}

func (c *Cluster) kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.Bins.Kubernetes.Path("kubectl"), append([]string{"--kubeconfig", c.Layout.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c *Cluster) waitNodeReady(ctx context.Context, node string) error {
	// The node object appears once the kubelet has registered.
	err := controlplane.WaitFor(ctx, "node registration", 3*time.Minute, nil, func(ctx context.Context) error {
		_, err := c.kubectl(ctx, "get", "node", node)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w (log: %s)", err, c.Layout.LogFile("kubelet"))
	}
	if _, err := c.kubectl(ctx, "wait", "--for=condition=Ready", "node/"+node, "--timeout=180s"); err != nil {
		return fmt.Errorf("node %s not Ready: %w (log: %s)", node, err, c.Layout.LogFile("kubelet"))
	}
	// Pods need the namespace's default service account and root CA from the controllers.
	return controlplane.WaitFor(ctx, "default service account", 2*time.Minute, nil, func(ctx context.Context) error {
		if _, err := c.kubectl(ctx, "get", "serviceaccount", "default", "-n", "default"); err != nil {
			return err
		}
		_, err := c.kubectl(ctx, "get", "configmap", "kube-root-ca.crt", "-n", "default")
		return err
	})
}

// writeEnv writes the paths that the driver's chart, the e2e suite and people need as a
// shell-sourceable file.
func (c *Cluster) writeEnv(f *host.Facts) error {
	l := c.Layout
	vars := [][2]string{
		{"KUBECONFIG", l.Kubeconfig()},
		{"KUBECTL", filepath.Join(l.Repo, "_output", "bin", "kubectl")},
		{"LOCALCLUSTER_NODE", f.NodeName},
		{"LOCALCLUSTER_NODE_IP", f.NodeIP.String()},
		{"LOCALCLUSTER_KUBELET_DIR", l.KubeletRoot()},
		{"LOCALCLUSTER_CONTAINERD_SOCKET", l.ContainerdSocket()},
		{"LOCALCLUSTER_CTR", c.Bins.Containerd.Path("ctr")},
		{"LOCALCLUSTER_NRI_SOCKET", l.NRISocket()},
		{"LOCALCLUSTER_NETNS_DIR", l.NetnsDir()},
		{"LOCALCLUSTER_MOCK_NETDEVS", l.MockNetRecord()},
		{"LOCALCLUSTER_MOCK_ROOT", l.MockRoot()},
		{"LOCALCLUSTER_MOCK_SYS", l.MockSys()},
		{"LOCALCLUSTER_MOCK_DEV", l.MockDev()},
		{"LOCALCLUSTER_CDI_DIR", "/var/run/cdi"},
		{"LOCALCLUSTER_DEVICE_METADATA_ROOT", l.DeviceMetadataRoot()},
		{"LOCALCLUSTER_LOGS", l.Logs()},
	}
	var b strings.Builder
	b.WriteString("# Written by make cluster-up: source it to use the local cluster.\n")
	for _, v := range vars {
		fmt.Fprintf(&b, "export %s=%q\n", v[0], v[1])
	}
	if err := os.WriteFile(l.EnvFile(), []byte(b.String()), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", l.EnvFile(), err)
	}
	return c.LinkKubectl()
}

// LinkKubectl links _output/bin/kubectl to the cached kubectl, where people look for it.
func (c *Cluster) LinkKubectl() error {
	bin := filepath.Join(c.Layout.Repo, "_output", "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", bin, err)
	}
	_ = os.Remove(filepath.Join(bin, "kubectl"))
	if err := os.Symlink(c.Bins.Kubernetes.Path("kubectl"), filepath.Join(bin, "kubectl")); err != nil {
		return fmt.Errorf("link kubectl: %w", err)
	}
	return nil
}

func (c *Cluster) printUsage() {
	l := c.Layout
	rel := func(p string) string {
		if r, err := filepath.Rel(l.Repo, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	fmt.Printf(`
The local cluster is up.
  export KUBECONFIG=%s
  %s get nodes
  source %s            # all paths below as variables
  mock node:  %s  (sys: %s, dev: %s)
  kubelet dir: %s   containerd: %s
  logs:       %s/*.log
  stop:       make cluster-down
`, l.Kubeconfig(), rel(filepath.Join(l.Repo, "_output", "bin", "kubectl")), rel(l.EnvFile()),
		l.MockRoot(), l.MockSys(), l.MockDev(), l.KubeletRoot(), l.ContainerdSocket(), rel(l.Logs()))
}

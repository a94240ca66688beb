package localcluster

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/utils/ptr"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode/mocknet"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mockgpu"
)

// Names of the driver's Helm release on the local cluster.
const (
	DriverRelease   = "rdma-dra-driver"
	DriverNamespace = "rdma-dra-driver"
	// DriverDaemonSet is the chart's DaemonSet for the release name above.
	DriverDaemonSet = "rdma-dra-driver-kubelet-plugin"
	// DriverName is the chart's default DRA driver name.
	DriverName = "rdma.dra.io"
	// HookInstallDir is where the plugin installs its CDI hook on this cluster: under
	// StateRoot, so that cluster-down removes whatever an uninstall left.
	HookInstallDir = StateRoot + "/rdma-dra/bin"
	// DriverCDISpecGlob matches the driver's per-claim CDI specs on the host.
	DriverCDISpecGlob = "/var/run/cdi/k8s.rdma.dra.io-hca_*.json"
)

// DriverOptions say how to install the driver's chart.
type DriverOptions struct {
	// Helm is the helm binary.
	Helm string
	// Chart is the chart directory; default <repo>/deployments/helm/rdma-dra-driver.
	Chart string
	// Archive is an OCI archive to import first (optional).
	Archive string
	// Repository and Tag name the image.
	Repository, Tag string
	// ValuesFiles and Set are passed to helm after the local cluster's values.
	ValuesFiles []string
	Set         []string
	// Timeout bounds the rollout and the wait for ResourceSlices.
	Timeout time.Duration
}

// DriverValuesFile is the values file with the local cluster's paths that InstallDriver
// writes and passes to helm first.
func (l Layout) DriverValuesFile() string { return filepath.Join(l.Config(), "driver-values.yaml") }

// driverValues are the chart values of mock mode on this cluster: the image, the
// cluster's paths, network attachment through the local containerd's NRI socket with the
// emulated RDMA kernel, and the node configuration's address pools for the mock netdevs'
// stand-ins (mocknet.AddressPools; none when the record has no stand-ins).
// LegacyExtendedResource is the extended resource name the local cluster's legacy pool
// serves: k8s-rdma-shared-dev-plugin's default, for the unchanged-pod demo and test. One
// unit is every InfiniBand port of the node (the rails of the dgx-h100 profile), shared
// by at most LegacyMaxPods pods.
const LegacyExtendedResource = "rdma/hca_shared_devices_a"

// LegacyMaxPods is the local cluster's rdmaHcaMax: small, so that the test fills it.
const LegacyMaxPods = 2

// RailCount is the number of compute rails of the local cluster's mock node (dgx-h100):
// its eight InfiniBand ports, one per GPU.
const RailCount = 8

// Rails is the local cluster's rails section: InfiniBand port mlx5_<i> is on rail i, by
// RDMA device name, as one file for a pool of identical nodes would say it
// (docs/device-model.md, "Rails and accelerator pairing").
func Rails() []nodeconfig.Rail {
	rails := make([]nodeconfig.Rail, RailCount)
	for i := range rails {
		rails[i] = nodeconfig.Rail{Rail: ptr.To(i), Selectors: []nodeconfig.Selector{{IBDevs: []string{fmt.Sprintf("mlx5_%d", i)}}}}
	}
	return rails
}

func (l Layout) driverValues(repository, tag string, pools []nodeconfig.AddressPool) (string, error) {
	head := fmt.Sprintf(`# Written by localcluster install: the chart in mock mode on the local cluster.
image:
  repository: %q
  tag: %q
  pullPolicy: Never
kubeletDir: %q
hookInstallDir: %q
mock:
  enabled: true
  sysfsRoot: %q
  devRoot: %q
# Device metadata files under the cluster's own run directory, which make cluster-down
# removes.
deviceMetadata:
  root: %q
# Pods written for the device plugin run unchanged here, with its unit: every InfiniBand
# port (demo/legacy-extended-resource, e2e TestLegacyExtendedResource); the chart leaves
# the name free by default.
pools:
  legacy:
    enabled: true
    extendedResourceName: %q
    maxPods: %d
    selectors:
      linkTypes: [InfiniBand]
`, repository, tag, l.KubeletRoot(), HookInstallDir, l.MockSys(), l.MockDev(), l.DeviceMetadataRoot(), LegacyExtendedResource, LegacyMaxPods)
	type attachment struct {
		Enabled    bool   `json:"enabled"`
		NRISocket  string `json:"nriSocket"`
		NetnsDir   string `json:"netnsDir"`
		RdmaKernel string `json:"rdmaKernel"`
	}
	type nodeConfig struct {
		Network *nodeconfig.NetworkConfig `json:"network,omitempty"`
		Rails   []nodeconfig.Rail         `json:"rails"`
	}
	net := struct {
		NetworkAttachment attachment `json:"networkAttachment"`
		NodeConfig        nodeConfig `json:"nodeConfig"`
	}{
		NetworkAttachment: attachment{Enabled: true, NRISocket: l.NRISocket(), NetnsDir: l.NetnsDir(), RdmaKernel: "emulated"},
		NodeConfig:        nodeConfig{Rails: Rails()},
	}
	if len(pools) > 0 {
		net.NodeConfig.Network = &nodeconfig.NetworkConfig{AddressPools: pools}
	}
	data, err := yaml.Marshal(net)
	if err != nil {
		return "", fmt.Errorf("chart values: %w", err)
	}
	return head + "# Network attachment on the mock netdevs' stand-ins, and the mock node's rails\n# (docs/local-cluster.md).\n" + string(data), nil
}

// InstallDriver imports the driver image, installs or upgrades the chart in mock mode and
// waits until the plugin pod is Ready and the node's ResourceSlices are published; then
// it installs the mock GPU driver on the same mock node (InstallMockGPU).
func (c *Cluster) InstallDriver(ctx context.Context, o DriverOptions) error {
	start := time.Now()
	l, log := c.Layout, c.Log
	if st := c.status(); st.running != len(st.rows) || st.running == 0 {
		return errors.New("the local cluster is not running; run make cluster-up")
	}
	if o.Timeout == 0 {
		o.Timeout = 3 * time.Minute
	}
	if o.Chart == "" {
		o.Chart = filepath.Join(l.Repo, "deployments", "helm", "rdma-dra-driver")
	}
	if o.Archive != "" {
		if err := ImportArchive(ctx, l, c.Bins, o.Archive); err != nil {
			return err
		}
		log.Info("imported driver image", "archive", o.Archive)
	}
	if err := os.MkdirAll(l.Config(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.Config(), err)
	}
	rec, err := mocknet.ReadRecord(l.MockNetRecord())
	if err != nil {
		return err
	}
	values, err := l.driverValues(o.Repository, o.Tag, mocknet.AddressPools(rec))
	if err != nil {
		return err
	}
	if err := os.WriteFile(l.DriverValuesFile(), []byte(values), 0o644); err != nil {
		return fmt.Errorf("write driver values: %w", err)
	}
	args := []string{"upgrade", "--install", DriverRelease, o.Chart, "--namespace", DriverNamespace, "--create-namespace",
		"--values", l.DriverValuesFile()}
	for _, f := range o.ValuesFiles {
		args = append(args, "--values", f)
	}
	for _, s := range o.Set {
		args = append(args, "--set", s)
	}
	if _, err := c.helm(ctx, o.Helm, args...); err != nil {
		return err
	}
	if err := c.WaitDriverReady(ctx, o.Timeout); err != nil {
		return err
	}
	// The GPUs that claims pair with the driver's ports: a second driver, installed
	// with the first so that cluster-up and install both leave the pair ready.
	if err := c.InstallMockGPU(ctx, l.MockSys(), o.Timeout); err != nil {
		return err
	}
	log.Info("driver installed", "image", o.Repository+":"+o.Tag, "took", time.Since(start).Round(time.Second).String())
	c.printDriverUsage()
	return nil
}

// WaitDriverReady waits for the plugin's rollout and for a ResourceSlice of this node.
func (c *Cluster) WaitDriverReady(ctx context.Context, timeout time.Duration) error {
	if _, err := c.kubectl(ctx, "-n", DriverNamespace, "rollout", "status", "daemonset/"+DriverDaemonSet,
		fmt.Sprintf("--timeout=%s", timeout)); err != nil {
		return fmt.Errorf("plugin rollout: %w (logs: %s)", err, c.driverLogHint())
	}
	node, err := c.nodeName(ctx)
	if err != nil {
		return err
	}
	return controlplane.WaitFor(ctx, "ResourceSlices of node "+node, timeout, nil, func(ctx context.Context) error {
		out, err := c.kubectl(ctx, "get", "resourceslices", "-o", "name",
			"--field-selector", "spec.nodeName="+node+",spec.driver="+DriverName)
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "" {
			return errors.New("none published yet")
		}
		return nil
	})
}

// UninstallDriver removes the chart's release and waits for the plugin pods to be gone. A
// cluster that is not running or a release that is not installed is not an error.
func (c *Cluster) UninstallDriver(ctx context.Context, helmBin string) error {
	if st := c.status(); st.running != len(st.rows) || st.running == 0 {
		c.Log.Info("cluster not running; nothing to uninstall")
		return nil
	}
	out, err := c.helm(ctx, helmBin, "status", DriverRelease, "--namespace", DriverNamespace)
	if err != nil {
		if strings.Contains(out, "not found") {
			return nil
		}
		return err
	}
	if _, err := c.helm(ctx, helmBin, "uninstall", DriverRelease, "--namespace", DriverNamespace, "--wait", "--timeout", "90s"); err != nil {
		return err
	}
	c.Log.Info("driver uninstalled", "release", DriverRelease)
	return nil
}

func (c *Cluster) helm(ctx context.Context, helmBin string, args ...string) (string, error) {
	if helmBin == "" {
		helmBin = filepath.Join(c.Layout.Repo, "_output", "bin", "helm")
	}
	cmd := exec.CommandContext(ctx, helmBin, append(args, "--kubeconfig", c.Layout.Kubeconfig())...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (c *Cluster) nodeName(ctx context.Context) (string, error) {
	out, err := c.kubectl(ctx, "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

func (c *Cluster) driverLogHint() string {
	return "kubectl -n " + DriverNamespace + " logs daemonset/" + DriverDaemonSet
}

func (c *Cluster) printDriverUsage() {
	fmt.Printf(`
The driver runs in mock mode (release %s in namespace %s).
  export KUBECONFIG=%s
  _output/bin/kubectl get resourceslices -o wide
  _output/bin/kubectl get deviceclasses
  _output/bin/kubectl -n %s logs daemonset/%s
  mock GPUs:      _output/bin/kubectl get resourceslices --field-selector spec.driver=%s (DeviceClass %s)
  try a workload: _output/bin/kubectl apply -f demo/shared-port/claim-shared-by-two-pods.yaml
  or run:         make demo
  stop:           make cluster-down
`, DriverRelease, DriverNamespace, c.Layout.Kubeconfig(), DriverNamespace, DriverDaemonSet, mockgpu.DriverName, MockGPUDeviceClass)
}

// RestartComponent stops one process of the cluster and starts it again with the same
// command line and environment, read from /proc before it stops; e.g. the kubelet.
func (c *Cluster) RestartComponent(ctx context.Context, name string) error {
	l := c.Layout
	r, err := readPidFile(l.PidFile(name))
	if err != nil || !r.alive() {
		return fmt.Errorf("%s is not running (pid file %s)", name, l.PidFile(name))
	}
	argv, err := procStrings(fmt.Sprintf("/proc/%d/cmdline", r.Pid))
	if err != nil {
		return err
	}
	env, err := procStrings(fmt.Sprintf("/proc/%d/environ", r.Pid))
	if err != nil {
		return err
	}
	if _, err := stopProcess(l, name, 20*time.Second); err != nil {
		return err
	}
	// startProcess adds os.Environ(); the old process's environment goes last and wins.
	nr, err := startProcess(l, name, argv, env)
	if err != nil {
		return err
	}
	c.Log.Info("restarted", "component", name, "oldPid", r.Pid, "pid", nr.Pid)
	if name == "kubelet" {
		return controlplane.WaitFor(ctx, "kubelet healthz", 2*time.Minute, nr.alive, controlplane.HTTPCheck(&http.Client{Timeout: 3 * time.Second}, "http://127.0.0.1:10248/healthz", "ok"))
	}
	return nil
}

// procStrings reads a NUL-separated /proc file.
func procStrings(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return strings.Split(strings.TrimRight(string(data), "\x00"), "\x00"), nil
}

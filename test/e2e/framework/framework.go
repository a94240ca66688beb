// Package framework is the small toolkit of the end-to-end suite: the local cluster's paths
// and clients, the driver's Helm release, namespaces that clean up after themselves, pods
// that print what the driver gave them, and waiting. The suite runs against the cluster that
// `make cluster-up` starts (docs/e2e.md).
package framework

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Names of the driver's installation, as the cluster tool installs it.
const (
	Release    = "rdma-dra-driver"
	Namespace  = "rdma-dra-driver"
	DaemonSet  = "rdma-dra-driver-kubelet-plugin"
	DriverName = "rdma.dra.io"
	// ToolboxImage is the shell image the cluster imports.
	ToolboxImage = "localhost/toolbox:latest"
)

// ControllerDeployment is the controller's (and webhook's) Deployment.
const ControllerDeployment = "rdma-dra-driver-controller"

// Env is the local cluster as `_output/local-cluster/env` describes it.
type Env struct {
	Repo       string
	Vars       map[string]string
	Kubeconfig string
	Node       string
	REST       *rest.Config
	Client     kubernetes.Interface
}

// Load reads the cluster's env file below the repository root and builds the clients.
func Load(repo string) (*Env, error) {
	path := filepath.Join(repo, "_output", "local-cluster", "env")
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open %s (is the local cluster up? make cluster-up): %w", path, err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "export ")
		if !ok {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			vars[k] = strings.Trim(v, `"`)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	e := &Env{Repo: repo, Vars: vars, Kubeconfig: vars["KUBECONFIG"], Node: vars["LOCALCLUSTER_NODE"]}
	if e.Kubeconfig == "" || e.Node == "" {
		return nil, fmt.Errorf("%s lacks KUBECONFIG or LOCALCLUSTER_NODE", path)
	}
	if vars["LOCALCLUSTER_DEVICE_METADATA_ROOT"] == "" {
		return nil, fmt.Errorf("%s lacks LOCALCLUSTER_DEVICE_METADATA_ROOT: the cluster was started by an older make cluster-up; make cluster-down && make cluster-up", path)
	}
	if e.REST, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return nil, fmt.Errorf("load %s: %w", e.Kubeconfig, err)
	}
	e.REST.QPS, e.REST.Burst = 50, 100
	if e.Client, err = kubernetes.NewForConfig(e.REST); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return e, nil
}

// KubeletDir is the kubelet's root directory on the host.
func (e *Env) KubeletDir() string { return e.Vars["LOCALCLUSTER_KUBELET_DIR"] }

// PluginDataDir is the plugin's data directory on the host (checkpoint.json lives there).
func (e *Env) PluginDataDir() string {
	return filepath.Join(e.KubeletDir(), "plugins", DriverName)
}

// DeviceMetadataDir is the plugin's directory of device metadata files on the host, which
// its data directory links to.
func (e *Env) DeviceMetadataDir() string {
	return filepath.Join(e.Vars["LOCALCLUSTER_DEVICE_METADATA_ROOT"], DriverName)
}

// CDIDir is the directory of the transient CDI specs on the host.
func (e *Env) CDIDir() string { return e.Vars["LOCALCLUSTER_CDI_DIR"] }

// HookInstallDir is where the plugin installs its hook on the local cluster.
func (e *Env) HookInstallDir() string { return "/var/lib/rdma-dra-local/rdma-dra/bin" }

// ValuesFile is the chart values file the cluster tool wrote for mock mode.
func (e *Env) ValuesFile() string {
	return filepath.Join(e.Repo, "_output", "local-cluster", "config", "driver-values.yaml")
}

// Helm runs the repository's helm against the cluster.
func (e *Env) Helm(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, e.helmPath(), append(args, "--kubeconfig", e.Kubeconfig)...)
}

// Kubectl runs the cluster's kubectl.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, filepath.Join(e.Repo, "_output", "bin", "kubectl"), append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
}

// ClusterTool runs the local cluster tool (restart, import, ...).
func (e *Env) ClusterTool(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, filepath.Join(e.Repo, "_output", "cluster-cache", "tools", "localcluster"), append([]string{"-repo", e.Repo}, args...)...)
}

// Ctr runs the cluster's ctr in containerd's k8s.io namespace.
func (e *Env) Ctr(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, e.Vars["LOCALCLUSTER_CTR"], append([]string{"--address", e.Vars["LOCALCLUSTER_CONTAINERD_SOCKET"], "-n", "k8s.io"}, args...)...)
}

func (e *Env) run(ctx context.Context, bin string, args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.Dir = e.Repo
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", filepath.Base(bin), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// Context returns a context that ends with the test or after d.
func Context(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls check every interval until it returns nil or timeout passes, then
// fails the test with the last error.
func Eventually(t *testing.T, ctx context.Context, timeout, interval time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	if err := Poll(ctx, timeout, interval, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// Poll is Eventually without a test: it checks at once and then every interval, and
// returns the last error of check after timeout. An error of a check cut short by the
// deadline does not hide the one before it, which says what was still missing.
func Poll(ctx context.Context, timeout, interval time.Duration, check func(ctx context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		if err != nil && ctx.Err() != nil && last != nil {
			return false, nil
		}
		last = err
		return err == nil, nil
	})
	switch {
	case err == nil:
		return nil
	case last != nil:
		return fmt.Errorf("after %s: %w", timeout, last)
	default:
		return fmt.Errorf("after %s: %w", timeout, err)
	}
}

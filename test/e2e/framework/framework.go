// Package framework is the small toolkit of the end-to-end suite: the cluster under test
// and its clients, the node's host where the suite may reach it, the driver's Helm release,
// namespaces that clean up after themselves, pods that print what the driver gave them,
// and waiting. The suite runs against the cluster that `make cluster-up` starts, or any
// other that KUBECONFIG names (docs/e2e.md).
package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Env is the cluster under test, the node the suite tests on, and what the suite may do
// there beside the API (Host).
type Env struct {
	Repo       string
	Kubeconfig string
	Node       string
	REST       *rest.Config
	Client     kubernetes.Interface
	// Host is the node's host; nil when the suite has no access to it (then noHost says
	// why).
	Host   Host
	noHost string
	// MockProfile is the mock node profile the node runs, "" on RDMA hardware.
	MockProfile string
	// Values are the cluster's chart values files, which the suite installs the chart
	// with before its own (E2EValuesFile).
	Values []string
	// helm and kubectl are the programs the suite runs (tool).
	helm, kubectl string
}

// Load finds the cluster under test from the environment (config.go: KUBECONFIG, E2E_NODE,
// E2E_VALUES, E2E_MOCK_PROFILE, E2E_HOST, or the local cluster below the repository
// root), builds the clients and reads the node.
func Load(repo string) (*Env, error) {
	c, err := resolve(repo, os.Getenv)
	if err != nil {
		return nil, err
	}
	e := &Env{Repo: repo, Kubeconfig: c.kubeconfig, Node: c.node, Values: c.values, noHost: c.noHost,
		helm: tool(repo, "helm", "HELM"), kubectl: tool(repo, "kubectl", "KUBECTL")}
	if e.REST, err = clientcmd.BuildConfigFromFlags("", e.Kubeconfig); err != nil {
		return nil, fmt.Errorf("load %s: %w", e.Kubeconfig, err)
	}
	e.REST.QPS, e.REST.Burst = 50, 100
	if e.Client, err = kubernetes.NewForConfig(e.REST); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := e.Client.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("read node %s: %w", e.Node, err)
	}
	e.MockProfile = mockProfile(c.mockProfile, node.Labels[MockProfileLabel])
	if c.local != nil && c.noHost == "" {
		e.Host = newLocalHost(repo, c.local)
	}
	return e, nil
}

// mockProfile is the mock profile of the node: as configured (noMock: none), else as
// its label says.
func mockProfile(configured, label string) string {
	switch configured {
	case noMock:
		return ""
	case "":
		return label
	}
	return configured
}

// E2EValuesFile holds the suite's chart values (2 shares per port, so limits are quick to reach).
func (e *Env) E2EValuesFile() string {
	return filepath.Join(e.Repo, "test", "e2e", "testdata", "values-e2e.yaml")
}

// ValuesArgs are helm's --values arguments of the cluster's values files and the suite's.
func (e *Env) ValuesArgs() []string {
	var args []string
	for _, v := range append(slices.Clone(e.Values), e.E2EValuesFile()) {
		args = append(args, "--values", v)
	}
	return args
}

// Helm runs helm against the cluster.
func (e *Env) Helm(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, e.helm, append(args, "--kubeconfig", e.Kubeconfig)...)
}

// Kubectl runs kubectl against the cluster.
func (e *Env) Kubectl(ctx context.Context, args ...string) (string, error) {
	return e.run(ctx, e.kubectl, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
}

func (e *Env) run(ctx context.Context, bin string, args ...string) (string, error) {
	return runIn(ctx, e.Repo, bin, args...)
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

package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The environment that chooses the cluster under test and what the suite may do there
// (docs/e2e.md, "Running it on another cluster").
const (
	// EnvKubeconfig names the cluster: one kubeconfig file, its current context. Unset, the
	// suite uses the local cluster's when that is up.
	EnvKubeconfig = "KUBECONFIG"
	// EnvNode names the node the suite tests. Required on any cluster but the local one: it
	// is also the consent that the suite may reinstall the driver and take that node's ports.
	EnvNode = "E2E_NODE"
	// EnvValues lists the chart values files of the cluster (comma-separated), which the
	// suite installs the chart with before its own values; default on the local cluster:
	// the values the cluster tool wrote.
	EnvValues = "E2E_VALUES"
	// EnvMockProfile names the mock node profile the node runs (rdma-dra mock-node), "none"
	// for RDMA hardware. Default: the node's MockProfileLabel, else on the local cluster
	// SuiteMockProfile.
	EnvMockProfile = "E2E_MOCK_PROFILE"
	// EnvHost set to "none" keeps the suite off the node's host even on the local cluster,
	// as on a cluster without host access.
	EnvHost = "E2E_HOST"
)

// MockProfileLabel is the node label that names the mock profile a node runs (the kind
// demo's config sets it).
const MockProfileLabel = "rdma.dra.io/mock-profile"

// SuiteMockProfile is the mock node the tests that name ports were written for: 8
// InfiniBand ports mlx5_0..7 on two NUMA nodes, RoCE ports mlx5_8/9 behind one PCIe root.
const SuiteMockProfile = "dgx-h100"

// noMock is EnvMockProfile's value for a node with RDMA hardware.
const noMock = "none"

// config is what the environment says about the cluster under test, before any client
// talks to it.
type config struct {
	kubeconfig string
	// node is "" when the node's name must come from somewhere else; never on a config
	// that resolve returns.
	node   string
	values []string
	// mockProfile is "" when not given: the node's label decides; noMock for hardware.
	mockProfile string
	// local holds the local cluster's env file when the suite tests the local cluster.
	local map[string]string
	// noHost says why the suite has no host access; "" when it has (the local cluster).
	noHost string
}

// localEnvFile is the local cluster's env file below the repository root, which `make
// cluster-up` writes.
func localEnvFile(repo string) string {
	return filepath.Join(repo, "_output", "local-cluster", "env")
}

// localValuesFile is the chart values file the cluster tool wrote for the local cluster.
func localValuesFile(repo string) string {
	return filepath.Join(repo, "_output", "local-cluster", "config", "driver-values.yaml")
}

// resolve reads the environment (getenv) and the local cluster's env file, if there is
// one, into a config. The local cluster is the one under test when KUBECONFIG is unset or
// names the local cluster's kubeconfig; then its node, values and mock profile are the
// defaults and its host is the suite's own machine. Any other cluster needs E2E_NODE.
func resolve(repo string, getenv func(string) string) (config, error) {
	path := localEnvFile(repo)
	local, err := readEnvFile(path)
	if err != nil {
		return config{}, err
	}
	c := config{kubeconfig: getenv(EnvKubeconfig), mockProfile: getenv(EnvMockProfile)}
	switch {
	case c.kubeconfig == "" && local == nil:
		return config{}, fmt.Errorf("no cluster to test: set %s (and %s) or start the local cluster (make cluster-up)", EnvKubeconfig, EnvNode)
	case c.kubeconfig == "":
		c.kubeconfig = local["KUBECONFIG"]
	case strings.ContainsRune(c.kubeconfig, os.PathListSeparator):
		return config{}, fmt.Errorf("%s=%s names several files; the suite hands one to helm, kubectl and rdma-dra doctor", EnvKubeconfig, c.kubeconfig)
	}
	if local != nil && samePath(c.kubeconfig, local["KUBECONFIG"]) {
		if err := checkLocalEnv(path, local); err != nil {
			return config{}, err
		}
		c.local, c.node, c.values = local, local["LOCALCLUSTER_NODE"], []string{localValuesFile(repo)}
		if c.mockProfile == "" {
			c.mockProfile = SuiteMockProfile
		}
	} else {
		c.noHost = "only the local cluster's host is reachable (docs/e2e.md)"
	}
	if n := getenv(EnvNode); n != "" {
		c.node = n
	}
	if c.node == "" {
		return config{}, fmt.Errorf("%s=%s is not the local cluster: set %s to the node to test (the suite reinstalls the driver and takes that node's ports)", EnvKubeconfig, c.kubeconfig, EnvNode)
	}
	if v := getenv(EnvValues); v != "" {
		c.values = strings.Split(v, ",")
	}
	switch h := getenv(EnvHost); h {
	case "":
	case "none":
		c.noHost = EnvHost + "=none"
	default:
		return config{}, fmt.Errorf("%s=%q: the only value is none (the local cluster's host is used by itself)", EnvHost, h)
	}
	return c, nil
}

// checkLocalEnv says what the local cluster's env file lacks that the suite needs.
func checkLocalEnv(path string, vars map[string]string) error {
	if vars["KUBECONFIG"] == "" || vars["LOCALCLUSTER_NODE"] == "" {
		return fmt.Errorf("%s lacks KUBECONFIG or LOCALCLUSTER_NODE", path)
	}
	if vars["LOCALCLUSTER_DEVICE_METADATA_ROOT"] == "" {
		return fmt.Errorf("%s lacks LOCALCLUSTER_DEVICE_METADATA_ROOT: the cluster was started by an older make cluster-up; make cluster-down && make cluster-up", path)
	}
	return nil
}

// readEnvFile reads the `export NAME="value"` lines of the local cluster's env file; a
// missing file is no local cluster (nil).
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open the local cluster's env file: %w", err)
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
	return vars, nil
}

// samePath reports whether a and b name the same file, links resolved where they exist.
func samePath(a, b string) bool {
	canon := func(p string) string {
		abs, err := filepath.Abs(p)
		if err != nil {
			return filepath.Clean(p)
		}
		if r, err := filepath.EvalSymlinks(abs); err == nil {
			return r
		}
		return abs
	}
	return a != "" && b != "" && canon(a) == canon(b)
}

// tool is the program the suite runs for name: the environment variable env when set,
// else the repository's _output/bin/<name> (make's), else name on PATH; when there is
// none, the repository's path, so that the error names where it was looked for.
func tool(repo, name, env string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	own := filepath.Join(repo, "_output", "bin", name)
	if _, err := os.Stat(own); err == nil {
		return own
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	return own
}

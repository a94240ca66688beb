// Package localcluster runs a single-node Kubernetes cluster on this machine from binaries
// built from source: etcd, the control plane, containerd with CDI and NRI, the kubelet and
// kube-proxy, each a plain process with a pid file and a log file. Up and Down are
// idempotent; Down stops exactly the processes Up started and removes the state it created.
package localcluster

import (
	"fmt"
	"net"
	"path/filepath"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
)

// Fixed addresses and names of the cluster.
const (
	// StateRoot holds the runtime state that must live at a short, absolute path (unix socket
	// length limits, hostPath mounts of charts): kubelet root, containerd root, etcd data.
	StateRoot = "/var/lib/rdma-dra-local"
	// RunRoot holds sockets and containerd's state.
	RunRoot = "/run/rdma-dra-local"

	EtcdClientURL = "http://127.0.0.1:12379"
	etcdPeerURL   = "http://127.0.0.1:12380"
	APIServerPort = 6443

	// ServiceCIDR is the control plane's service range, the same for every launcher.
	ServiceCIDR = controlplane.ServiceCIDR
	ClusterCIDR = "10.244.0.0/16"
	// PodSubnet is the part of ClusterCIDR the node's bridge hands out.
	PodSubnet  = "10.244.0.0/24"
	BridgeName = "cni-rdmadra0"

	PauseImage   = "localhost/pause:latest"
	ToolboxImage = "localhost/toolbox:latest"

	// SmokeCDIKind is the CDI kind of the static spec the smoke test writes.
	SmokeCDIKind = "localcluster.rdma.dra.io/smoke"
)

// ServiceIP is the kubernetes service's cluster IP, the first address of ServiceCIDR.
var ServiceIP = net.IPv4(10, 96, 0, 1)

// Layout names every path of the cluster.
type Layout struct {
	// Repo is the repository root; Out is <Repo>/_output/local-cluster.
	Repo, Out string
	// Cache is the binary cache, <Repo>/_output/cluster-cache.
	Cache string
}

// NewLayout returns the layout of a cluster whose repository root is repo (absolute).
func NewLayout(repo string) Layout {
	return Layout{Repo: repo, Out: filepath.Join(repo, "_output", "local-cluster"), Cache: filepath.Join(repo, "_output", "cluster-cache")}
}

// Paths in the output directory, meant for people and for the other make targets.
func (l Layout) PKI() string            { return filepath.Join(l.Out, "pki") }
func (l Layout) Logs() string           { return filepath.Join(l.Out, "logs") }
func (l Layout) Kubeconfig() string     { return filepath.Join(l.Out, "kubeconfig") }
func (l Layout) Kubeconfigs() string    { return filepath.Join(l.Out, "kubeconfigs") }
func (l Layout) Config() string         { return filepath.Join(l.Out, "config") }
func (l Layout) Images() string         { return filepath.Join(l.Out, "images") }
func (l Layout) DefaultFixture() string { return filepath.Join(l.Out, "mock") }
func (l Layout) EnvFile() string        { return filepath.Join(l.Out, "env") }
func (l Layout) LogFile(name string) string {
	return filepath.Join(l.Logs(), name+".log")
}

// Configuration files that writeConfigs writes and the components read.
func (l Layout) containerdConfigFile() string { return filepath.Join(l.Config(), "containerd.toml") }
func (l Layout) kubeletConfigFile() string    { return filepath.Join(l.Config(), "kubelet.yaml") }
func (l Layout) kubeProxyConfigFile() string  { return filepath.Join(l.Config(), "kube-proxy.yaml") }

// statePaths are what Down removes: the runtime state and the output that a fresh Up
// writes again, but not the logs and not the binary cache.
func (l Layout) statePaths() []string {
	return []string{StateRoot, RunRoot, l.PKI(), l.Kubeconfigs(), l.Kubeconfig(), l.Config(), l.Images(), l.DefaultFixture(), filepath.Dir(l.ProfileFixture("x")), l.EnvFile()}
}

// Paths of runtime state.
func (l Layout) Pids() string            { return filepath.Join(RunRoot, "pids") }
func (l Layout) PidFile(n string) string { return filepath.Join(l.Pids(), n+".pid") }
func (l Layout) EtcdData() string        { return filepath.Join(StateRoot, "etcd") }
func (l Layout) ContainerdRoot() string  { return filepath.Join(StateRoot, "containerd") }
func (l Layout) ContainerdState() string {
	return filepath.Join(RunRoot, "containerd")
}
func (l Layout) ContainerdSocket() string { return filepath.Join(RunRoot, "containerd.sock") }
func (l Layout) KubeletRoot() string      { return filepath.Join(StateRoot, "kubelet") }
func (l Layout) PodLogs() string          { return filepath.Join(StateRoot, "pod-logs") }
func (l Layout) CNIConfDir() string       { return filepath.Join(StateRoot, "cni", "net.d") }
func (l Layout) CNIDataDir() string       { return filepath.Join(StateRoot, "cni", "networks") }
func (l Layout) NRIDir() string           { return filepath.Join(StateRoot, "nri") }
func (l Layout) SysctlFile() string       { return filepath.Join(StateRoot, "sysctl-restore.json") }

// MockRoot is the well-known path of the node fixture (a node tree with sys/ and dev/):
// a symlink to the fixture directory, so charts can mount it with a fixed hostPath.
func (l Layout) MockRoot() string { return filepath.Join(StateRoot, "mock") }

// MockSys and MockDev are the fixture's sysfs root and device root through MockRoot.
func (l Layout) MockSys() string { return filepath.Join(l.MockRoot(), "sys") }
func (l Layout) MockDev() string { return filepath.Join(l.MockRoot(), "dev") }

// MockNetRecord lists the host interfaces that stand in for the mock node's netdevs, as
// created (pkg/mocknode/mocknet); cluster-down deletes exactly these.
func (l Layout) MockNetRecord() string { return filepath.Join(StateRoot, "mock-netdevs.json") }

// NetnsDir is where containerd mounts the pods' network namespaces
// (netns_mounts_under_state_dir: the CRI plugin's state directory, then netns).
func (l Layout) NetnsDir() string {
	return filepath.Join(l.ContainerdState(), "io.containerd.grpc.v1.cri", "netns")
}

// NRISocket is containerd's NRI socket, which the driver's NRI plugin connects to.
func (l Layout) NRISocket() string { return filepath.Join(RunRoot, "nri.sock") }

// DeviceMetadataRoot is the chart's deviceMetadata.root on this cluster (on the host's
// tmpfs, like a node's /var/run).
func (l Layout) DeviceMetadataRoot() string { return filepath.Join(RunRoot, "device-metadata") }

// SmokeCDISpec is the static CDI spec the smoke test writes.
func (l Layout) SmokeCDISpec() string { return "/var/run/cdi/localcluster-smoke.yaml" }

// APIServerURL is the address host processes use.
func (l Layout) APIServerURL() string { return fmt.Sprintf("https://127.0.0.1:%d", APIServerPort) }

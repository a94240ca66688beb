package framework

import (
	"context"
	"errors"
	"io/fs"
	"net/netip"
	"path/filepath"
	"testing"
)

// Host is what the suite does on the node itself, beside the API: read and write its
// files, kill the plugin's process, restart the kubelet, put images into its container
// runtime, and look at its network interfaces. On the local cluster the node is the
// suite's own machine and LocalHost does all of it; on another cluster the suite has no
// Host, and the tests that need one skip (Env.NeedHost), naming what they would do.
//
// Paths are the node's absolute paths.
type Host interface {
	// Paths are where the node keeps what the tests look at.
	Paths() NodePaths

	// ReadFile, ReadDir, Lstat and Readlink read the node's files as their os namesakes
	// do (Lstat does not follow a final symbolic link).
	ReadFile(path string) ([]byte, error)
	ReadDir(path string) ([]fs.DirEntry, error)
	Lstat(path string) (fs.FileInfo, error)
	Readlink(path string) (string, error)
	// WriteFile replaces the file that path resolves to (symbolic links followed) at once:
	// a new file beside it renamed over it, so that a reader never sees it half written.
	WriteFile(path string, data []byte) error
	// Remove removes a file.
	Remove(path string) error

	// PluginPID finds the process of the kubelet plugin in the pod with that UID: the
	// plugin itself, not its probes, and not a previous pod's plugin still shutting down.
	PluginPID(podUID string) (int, error)
	// Kill sends SIGKILL to the process.
	Kill(pid int) error
	// RestartKubelet restarts the node's kubelet with the same command line.
	RestartKubelet(ctx context.Context) error
	// UseMockProfile makes the mock node that of a mock node profile (rdma-dra
	// mock-node), or "default" the one the node came up with. Plugins see it once
	// their pods restart.
	UseMockProfile(ctx context.Context, profile string) error

	// ImportImage imports an OCI archive into the container runtime's images for the
	// kubelet; TagImage gives an image a second name there, RemoveImage removes a name.
	ImportImage(ctx context.Context, archive string) error
	TagImage(ctx context.Context, ref, newRef string) error
	RemoveImage(ctx context.Context, ref string) error

	// Links returns the host's network interfaces, sorted by name, without the pod
	// network's veths and without link-local addresses.
	Links() ([]HostLink, error)
	// MockNetdevs returns the host interfaces that stand in for the mock node's netdevs.
	MockNetdevs() ([]MockNetdev, error)

	// GetLoopback answers an HTTP GET of path on the node's loopback at port, where the
	// plugin (on the host network) serves /metrics by default; an answer other than 200
	// is an error.
	GetLoopback(ctx context.Context, port int, path string) ([]byte, error)
}

// NodePaths are the directories of the node that the driver writes and reads, as the
// driver is installed there (its chart values).
type NodePaths struct {
	// KubeletDir is the kubelet's root directory; plugins/<driver> below it is a plugin's
	// data directory.
	KubeletDir string
	// CDIDir is the directory of the transient CDI specs.
	CDIDir string
	// HookDir is where the plugins install their CDI hooks.
	HookDir string
	// DeviceMetadataRoot holds a directory of device metadata files per driver.
	DeviceMetadataRoot string
	// SysRoot and DevRoot are the sysfs and /dev the plugin reads: the mock trees on a
	// mock node.
	SysRoot, DevRoot string
	// ContainerdConfig is the container runtime's configuration file.
	ContainerdConfig string
}

// HostLink is an interface of the host as the tests compare them before and after.
type HostLink struct {
	Name, HardwareAddr string
	MTU                int
	Up                 bool
	// Addresses are the global addresses with prefix length, sorted.
	Addresses []string
}

// MockNetdev is a host interface that stands in for a netdev of the mock node, as the
// tool that made it recorded it (the fields the suite compares).
type MockNetdev struct {
	Name         string
	HardwareAddr string
	MTU          int
	// Addresses are the host addresses the tool gave it.
	Addresses []netip.Prefix
}

// errNoHost is what a host read returns on a cluster without host access; a test that
// calls NeedHost first never sees it.
var errNoHost = errors.New("no access to the node's host")

// NeedHost returns the node's host, or skips the test when the suite has none, naming
// what the test would do there (e.g. "read the plugin's checkpoint").
func (e *Env) NeedHost(t testing.TB, what string) Host {
	t.Helper()
	if e.Host == nil {
		t.Skipf("needs access to the host of node %s to %s; the suite has none: %s", e.Node, what, e.noHost)
	}
	return e.Host
}

// NeedMockNode skips the test unless the node runs the mock node the suite's tests were
// written for (SuiteMockProfile): the test names its ports, netdevs or device numbers.
func (e *Env) NeedMockNode(t testing.TB) {
	t.Helper()
	if e.MockProfile != SuiteMockProfile {
		node := "RDMA hardware"
		if e.MockProfile != "" {
			node = "the mock profile " + e.MockProfile
		}
		t.Skipf("needs the %s mock node (it names its ports, netdevs and device numbers); node %s runs %s", SuiteMockProfile, e.Node, node)
	}
}

// paths are the host's paths, none without a host (every path is then relative and
// every read of the host fails with errNoHost).
func (e *Env) paths() NodePaths {
	if e.Host == nil {
		return NodePaths{}
	}
	return e.Host.Paths()
}

// host is the node's host for the framework's own reads.
func (e *Env) host() (Host, error) {
	if e.Host == nil {
		return nil, errNoHost
	}
	return e.Host, nil
}

// KubeletDir is the kubelet's root directory on the host.
func (e *Env) KubeletDir() string { return e.paths().KubeletDir }

// PluginDataDir is the plugin's data directory on the host (checkpoint.json lives there).
func (e *Env) PluginDataDir() string {
	return filepath.Join(e.KubeletDir(), "plugins", DriverName)
}

// DeviceMetadataDir is the plugin's directory of device metadata files on the host, which
// its data directory links to.
func (e *Env) DeviceMetadataDir() string {
	return filepath.Join(e.paths().DeviceMetadataRoot, DriverName)
}

// CDIDir is the directory of the transient CDI specs on the host.
func (e *Env) CDIDir() string { return e.paths().CDIDir }

// HookInstallDir is where the plugin installs its hook on the host.
func (e *Env) HookInstallDir() string { return e.paths().HookDir }

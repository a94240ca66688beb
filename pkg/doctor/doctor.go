// Package doctor checks a node's prerequisites for the rdma.dra.io driver: on the node,
// kernel modules, RDMA devices and their character devices, port states, the RDMA netns
// mode, RoCE GIDs, GPUDirect RDMA, and the container runtime's CDI, NRI and memlock
// settings; with a cluster (cluster.go), the API server's and kubelet's versions, the DRA
// API and whether the server keeps the device model's fields (a dry-run create of the
// node's ResourceSlices). Each node check is a small function over a Host, a view of the
// node through configurable roots (sysfs, /dev, /proc, config files), so that tests run
// the real checks against fake trees. Checks only read; nothing is changed.
package doctor

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/go-logr/logr"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Status is the verdict of one check.
type Status string

// Statuses, from good to bad; Skip means the check does not apply or cannot run here.
const (
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
	Skip Status = "SKIP"
)

// Names of the checks, in the order Run reports them. The runtime checks are reported
// once per container runtime found, named after it: containerd-cdi, crio-cdi.
const (
	CheckKernelModules = "kernel-modules"
	CheckRDMACMModule  = "rdma-cm-module"
	CheckRDMADevices   = "rdma-devices"
	CheckCharDevices   = "char-devices"
	CheckPortState     = "port-state"
	CheckRDMANetns     = "rdma-netns"
	CheckRoCEGID       = "roce-gid"
	CheckGPUDirect     = "gpudirect-rdma"
	CheckRuntime       = "container-runtime"
	CheckCDISuffix     = "-cdi"
	CheckCDISpecDirs   = "cdi-spec-dirs"
	CheckNRISuffix     = "-nri"
	CheckMemlockSuffix = "-memlock"
	CheckIBDev2Netdev  = "ibdev2netdev"
)

// Defaults of the live node.
const (
	// DefaultNRISocket is NRI's socket when the runtime's config names none, in
	// containerd and CRI-O alike, and the chart's networkAttachment.nriSocket.
	DefaultNRISocket = "/var/run/nri/nri.sock"
	// DefaultContainerdConfig and DefaultCRIOConfig are the runtimes' config files.
	DefaultContainerdConfig = "/etc/containerd/config.toml"
	DefaultCRIOConfig       = "/etc/crio/crio.conf"
)

// DefaultCDIDirs are the spec directories containerd and CRI-O scan by default; the
// kubelet plugin writes its specs to the second (chart value cdiDir).
var DefaultCDIDirs = []string{"/etc/cdi", "/var/run/cdi"}

// Result is the finding of one check.
type Result struct {
	// Check is the check's name, e.g. kernel-modules or containerd-nri.
	Check string `json:"check"`
	// Status is OK, WARN, FAIL or SKIP.
	Status Status `json:"status"`
	// Found says what the check saw, and for SKIP why it did not run.
	Found string `json:"found"`
	// Fix says what to change, for WARN and FAIL only.
	Fix string `json:"fix,omitempty"`
	// Details lists one line per item where a check has a listing to show
	// (ibdev2netdev); empty otherwise.
	Details []string `json:"details,omitempty"`
}

// DevNode is what a stat of a device node says.
type DevNode struct {
	// Char is true for a character device.
	Char bool
	// Major and Minor are the device numbers of a character or block device.
	Major, Minor uint32
}

// Executable is what a Go binary says about itself: its main module and version.
type Executable struct {
	// Module is the main module's path, e.g. github.com/containerd/containerd/v2.
	Module string
	// Version is the main module's version, e.g. v2.4.2, or (devel) for a local build.
	Version string
}

// Host is the node as the checks see it. Paths of config files and sockets are host
// paths; the roots let a test (or a container with the host's trees mounted elsewhere)
// point the checks at other trees.
type Host struct {
	// SysfsRoot, DevRoot and ProcRoot are the roots of sysfs, /dev and /proc.
	SysfsRoot, DevRoot, ProcRoot string
	// ContainerdConfig is containerd's config file; its imports are followed.
	ContainerdConfig string
	// CRIOConfig is CRI-O's config file; the drop-in directory CRIOConfig+".d" is read
	// after it.
	CRIOConfig string
	// CDIDirs are the CDI spec directories the driver needs: the runtime must scan each,
	// and each must be a writable directory.
	CDIDirs []string
	// NRISocket is the NRI socket when the runtime's config names none.
	NRISocket string

	// UseNetlink asks the kernel for the RDMA netns mode (right on the live /sys only).
	UseNetlink bool
	// StatDev stats a device node, following symbolic links.
	StatDev func(path string) (DevNode, error)
	// Executable reads the build information of the Go binary at path.
	Executable func(path string) (Executable, error)
	// Writable reports whether the directory dir can be written, without writing.
	Writable func(dir string) error

	// Cluster, when set, adds the cluster checks: the API server's and this node's
	// kubelet's versions, the DRA API, and the device model the plugin will publish.
	Cluster *Cluster
	// ClusterSkipped, with Cluster nil, says why the cluster is not checked; Run reports
	// it as one SKIP in the cluster checks' place. Empty: no cluster line at all.
	ClusterSkipped string
}

// DefaultHost is the live node: /sys, /dev, /proc and the runtimes' default config files.
func DefaultHost() Host {
	return Host{
		SysfsRoot:        sysfs.DefaultRoot,
		DevRoot:          "/dev",
		ProcRoot:         "/proc",
		ContainerdConfig: DefaultContainerdConfig,
		CRIOConfig:       DefaultCRIOConfig,
		CDIDirs:          append([]string(nil), DefaultCDIDirs...),
		NRISocket:        DefaultNRISocket,
	}
}

// withDefaults fills the seams that a Host built by hand leaves empty.
func (h Host) withDefaults() Host {
	if h.SysfsRoot == "" {
		h.SysfsRoot = sysfs.DefaultRoot
	}
	if h.NRISocket == "" {
		h.NRISocket = DefaultNRISocket
	}
	if h.StatDev == nil {
		h.StatDev = statDev
	}
	if h.Executable == nil {
		h.Executable = readExecutable
	}
	if h.Writable == nil {
		h.Writable = func(dir string) error { return unix.Access(dir, unix.W_OK) }
	}
	return h
}

func statDev(path string) (DevNode, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return DevNode{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	dev := uint64(st.Rdev) //nolint:unconvert // Rdev is uint32 on some platforms
	return DevNode{Char: st.Mode&unix.S_IFMT == unix.S_IFCHR, Major: unix.Major(dev), Minor: unix.Minor(dev)}, nil
}

func readExecutable(path string) (Executable, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return Executable{}, fmt.Errorf("read build info of %s: %w", path, err)
	}
	return Executable{Module: bi.Main.Path, Version: bi.Main.Version}, nil
}

// env is the state of one Run: the host and what several checks share, read once.
type env struct {
	h      Host
	logger logr.Logger
	// fs is the sysfs tree; nil when the root cannot be opened (fsErr says why).
	fs    *sysfs.FS
	fsErr error
	// inv is discovery's inventory; nil when discovery failed (invErr says why).
	inv    *discovery.Inventory
	invErr error
}

// Run runs every check against h and returns the results in a fixed order: kernel and
// devices first, then the container runtimes, then the cluster (with h.Cluster), the
// ibdev2netdev listing last.
func Run(ctx context.Context, h Host) []Result {
	h = h.withDefaults()
	e := &env{h: h, logger: klog.FromContext(ctx)}
	e.fs, e.fsErr = sysfs.Open(h.SysfsRoot)
	if e.fsErr == nil {
		e.inv, e.invErr = discovery.New(discovery.Options{SysfsRoot: h.SysfsRoot, UseNetlink: h.UseNetlink}).Discover(ctx)
	} else {
		e.invErr = e.fsErr
	}
	var out []Result
	for _, check := range []func(*env) Result{
		checkKernelModules, checkRDMACMModule, checkRDMADevices, checkCharDevices,
		checkPortState, checkRDMANetns, checkRoCEGID, checkGPUDirect,
	} {
		out = append(out, check(e))
	}
	out = append(out, checkRuntimes(e)...)
	switch {
	case h.Cluster != nil:
		out = append(out, runCluster(ctx, e, h.Cluster)...)
	case h.ClusterSkipped != "":
		out = append(out, Result{Check: CheckCluster, Status: Skip, Found: h.ClusterSkipped})
	}
	return append(out, checkIBDev2Netdev(e))
}

// exists reports whether name exists below the sysfs root.
func (e *env) exists(name string) bool { return e.fs != nil && e.fs.Exists(name) }

// noInventory is the SKIP of a check that needs discovery's inventory.
func (e *env) noInventory(check string) Result {
	return Result{Check: check, Status: Skip, Found: fmt.Sprintf("sysfs below %s could not be read (%v); see %s", e.h.SysfsRoot, e.invErr, CheckRDMADevices)}
}

// devPath is a node below the /dev root, e.g. infiniband/uverbs0.
func (e *env) devPath(rel string) string { return filepath.Join(e.h.DevRoot, filepath.FromSlash(rel)) }

// Worst returns the most severe status of rs: FAIL over WARN over OK; SKIP counts as OK.
func Worst(rs ...Status) Status {
	worst := OK
	for _, s := range rs {
		switch s {
		case Fail:
			return Fail
		case Warn:
			worst = Warn
		}
	}
	return worst
}

// Counts tallies the results by status.
func Counts(results []Result) map[Status]int {
	n := map[Status]int{}
	for _, r := range results {
		n[r.Status]++
	}
	return n
}

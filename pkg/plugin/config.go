package plugin

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// Config is the kubelet plugin's configuration, one field per flag (Flags declares them)
// and the test-only PrepareHoldFile.
type Config struct {
	NodeName   string
	DriverName string
	SysfsRoot  string
	DevRoot    string
	CDIRoot    string
	// RegistrarDir is the kubelet's plugin registration directory.
	RegistrarDir string
	// PluginsDir is the kubelet's plugin directory; the data directory is
	// PluginsDir/DriverName.
	PluginsDir string
	// PodUID enables the helper's rolling update when set.
	PodUID string
	// HealthcheckPort is the liveness port (HTTP /healthz); negative disables it.
	HealthcheckPort int
	// HealthcheckBindAddress is the host the liveness port listens on; 127.0.0.1 keeps
	// it off the node's network, empty is every address.
	HealthcheckBindAddress string
	// MetricsAddress is the /metrics listen address (--metrics-bind-address); empty
	// disables it.
	MetricsAddress string
	// MetricsAuth serves /metrics over HTTPS with authentication and authorization
	// (--metrics-secure, --metrics-tls-cert-file, --metrics-tls-key-file).
	MetricsAuth metricsauth.Config
	// NodeConfig is the node configuration file; empty uses the defaults.
	NodeConfig      string
	RescanInterval  time.Duration
	CleanupInterval time.Duration
	Model           publish.Model
	// HealthPollInterval is how often port states are polled.
	HealthPollInterval time.Duration
	// TaintEffect is the effect of the taint of a port that is not ACTIVE.
	TaintEffect resourceapi.DeviceTaintEffect
	// MaxRepublishPerMinute damps republishing after changes; 0 turns damping off.
	MaxRepublishPerMinute int
	// NodeEvents records an Event on the Node when a port changes state.
	NodeEvents bool
	// HookInstallDir is the host path (mounted at the same path) the hook goes to.
	HookInstallDir string
	// HookSource is the hook binary to install; empty is next to the executable.
	HookSource string
	// KubeClient is the API client's kubeconfig and rate limit (see DefaultKubeAPIQPS).
	KubeClient cliflags.KubeClient
	// Netlink is auto (or empty), true or false: whether to ask netlink for the RDMA
	// netns mode and watch netdevs through rtnetlink (UseNetlink).
	Netlink string
	// BootIDPath is the kernel's boot ID file.
	BootIDPath string
	// PrepareHoldFile is the test-only failpoint file (see PrepareHoldEnv).
	PrepareHoldFile string
	// Namespace and DaemonSetName name the plugin's DaemonSet; when both are set, the
	// plugin cleans the node up at shutdown if the DaemonSet is going away (uninstall.go).
	Namespace, DaemonSetName string
	// NetworkAttachment attaches claimed networks into pods through the runtime's NRI
	// (docs/network-attachment.md); NRISocket is the runtime's NRI socket.
	NetworkAttachment bool
	NRISocket         string
	// RDMAKernel is RDMAKernelSysfs or, on mock nodes, RDMAKernelEmulated.
	RDMAKernel string
	// NodeIPs are the node's addresses: move mode never takes a netdev that carries one.
	NodeIPs []string
	// StatusAPIQPS and StatusAPIBurst are the rate limit of the claim status writer's
	// client (see DefaultStatusAPIQPS).
	StatusAPIQPS   float64
	StatusAPIBurst int
	// DeviceMetadata gives containers the metadata of their devices (KEP-5304,
	// docs/device-metadata.md) through files the helper writes and CDI mounts.
	DeviceMetadata bool
	// DeviceMetadataRoot is the directory (a tmpfs: the files are of no use after a
	// reboot) that holds the device metadata files in DeviceMetadataRoot/DriverName,
	// linked from the data directory (metadataplace.go); empty keeps them in the data
	// directory.
	DeviceMetadataRoot string
	// ReadyFile is kept present while the kubelet has the plugin registered, for the
	// readiness probe (readiness.go); empty keeps none.
	ReadyFile string
}

// DefaultKubeAPIQPS and DefaultKubeAPIBurst are the plugin's client-side rate limit, the
// same as the kubelet's defaults (kubeAPIQPS 50, kubeAPIBurst 100). Every prepare costs
// one request on this client (the helper's GET of the claim; status goes through a client
// of its own), so the burst covers a node that starts 100 pods with a claim each at once, and 50 per second sustained
// is far above what a node's pod churn needs, while the limit still bounds what one node
// can do to the API server if something loops. On 1000 nodes the plugin adds at most what
// the kubelets themselves may already send for those pods (which GET the same claims);
// the API server's priority and fairness is what protects it across nodes. client-go's
// own default (5, burst 10) made prepare wait for the limiter at a few claims per second.
const (
	DefaultKubeAPIQPS   = 50
	DefaultKubeAPIBurst = 100
)

// DefaultStatusAPIQPS and DefaultStatusAPIBurst limit the claim status writer's own
// client. Status is written off the prepare path and coalesced per claim, so the budget
// only decides how soon a status appears, never whether: 5 per second covers a node's pod
// churn (300 pods a minute), a burst of 10 writes the first pods of a burst at once, and
// a node never spends more of the API server on a field that no component acts on.
const (
	DefaultStatusAPIQPS   = 5
	DefaultStatusAPIBurst = 10
)

// metadataFiles locates the device metadata files; nil when device metadata is off.
func metadataFiles(cfg Config) *MetadataFiles {
	if !cfg.DeviceMetadata {
		return nil
	}
	return &MetadataFiles{DriverName: cfg.DriverName, CDIDir: cfg.CDIRoot, DataDir: cfg.DataDir(), RunDir: cfg.MetadataDir()}
}

// DefaultDeviceMetadataRoot is where the device metadata files go by default: on the
// tmpfs of /var/run, like the CDI specs that mount them (metadataplace.go).
const DefaultDeviceMetadataRoot = "/var/run/rdma-dra-metadata"

// MetadataDir is the directory of the device metadata files outside the data directory,
// empty when they are kept in it.
func (c Config) MetadataDir() string {
	if c.DeviceMetadataRoot == "" {
		return ""
	}
	return filepath.Join(c.DeviceMetadataRoot, c.DriverName)
}

// TopologyDir is the directory of the claims' NCCL topology files, in the data
// directory: on the node's disk at the same path for the plugin and the runtime that
// mounts the files. Each goes with its claim's CDI spec.
func (c Config) TopologyDir() string { return filepath.Join(c.DataDir(), "nccl-topology") }

// DataDir is the plugin data directory: the DRA socket, the checkpoint and its lock.
func (c Config) DataDir() string { return filepath.Join(c.PluginsDir, c.DriverName) }

// UseNetlink resolves Netlink: auto is on only where sysfs is the node's own.
func (c Config) UseNetlink() bool {
	switch c.Netlink {
	case "true":
		return true
	case "", "auto":
		return c.SysfsRoot == "/sys"
	}
	return false
}

// Validate checks what flags cannot.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name (NODE_NAME) is required"))
	}
	if c.DriverName == "" {
		errs = append(errs, errors.New("--driver-name must not be empty"))
	}
	if c.RescanInterval <= 0 {
		errs = append(errs, fmt.Errorf("--rescan-interval must be positive, got %s", c.RescanInterval))
	}
	if c.CleanupInterval <= 0 {
		errs = append(errs, fmt.Errorf("--cleanup-interval must be positive, got %s", c.CleanupInterval))
	}
	if c.HealthcheckPort > 65535 {
		errs = append(errs, fmt.Errorf("--healthcheck-port must be at most 65535, got %d", c.HealthcheckPort))
	}
	if _, err := publish.ParseModel(string(c.Model)); err != nil {
		errs = append(errs, err)
	}
	if c.Netlink != "" && c.Netlink != "auto" && c.Netlink != "true" && c.Netlink != "false" {
		errs = append(errs, fmt.Errorf("--netlink must be auto, true or false, got %q", c.Netlink))
	}
	if c.HealthPollInterval <= 0 {
		errs = append(errs, fmt.Errorf("--health-poll-interval must be positive, got %s", c.HealthPollInterval))
	}
	if _, err := publish.ParseTaintEffect(string(c.TaintEffect)); err != nil {
		errs = append(errs, fmt.Errorf("--taint-effect: %w", err))
	}
	if err := health.ValidateMaxPerMinute(c.MaxRepublishPerMinute); err != nil {
		errs = append(errs, fmt.Errorf("--max-republish-per-minute: %w", err))
	}
	if err := c.KubeClient.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.StatusAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--status-api-qps must be positive, got %g", c.StatusAPIQPS))
	}
	if c.StatusAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--status-api-burst must be at least 1, got %d", c.StatusAPIBurst))
	}
	if err := c.validateMetadataRoot(); err != nil {
		errs = append(errs, err)
	}
	if err := c.MetricsAuth.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validateMetadataRoot refuses a metadata directory that is relative (the CDI specs name
// it on the host), inside the data directory (the link would point into itself) or
// around it (uninstall empties the metadata directory).
func (c Config) validateMetadataRoot() error {
	if c.DeviceMetadataRoot == "" {
		return nil
	}
	if !filepath.IsAbs(c.DeviceMetadataRoot) {
		return fmt.Errorf("--device-metadata-root must be an absolute path, got %q", c.DeviceMetadataRoot)
	}
	if within(c.MetadataDir(), c.DataDir()) || within(c.DataDir(), c.MetadataDir()) {
		return fmt.Errorf("--device-metadata-root %q: its directory %s and the data directory %s must not contain each other", c.DeviceMetadataRoot, c.MetadataDir(), c.DataDir())
	}
	return nil
}

// within says whether path is dir or below it (both clean and absolute).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

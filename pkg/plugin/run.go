package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/internal/version"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metricsauth"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Config is the kubelet plugin's configuration, one field per flag.
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
	Model           Model
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
	// Kubeconfig is a kubeconfig file; empty uses the in-cluster configuration.
	Kubeconfig string
	// Netlink asks netlink for the RDMA netns mode and watches netdevs through rtnetlink.
	Netlink bool
	// BootIDPath is the kernel's boot ID file.
	BootIDPath string
	// PrepareHoldFile is the test-only failpoint file (see PrepareHoldEnv).
	PrepareHoldFile string
	// Namespace and DaemonSetName name the plugin's DaemonSet; when both are set, the
	// plugin cleans the node up at shutdown if the DaemonSet is going away (uninstall.go).
	Namespace, DaemonSetName string
	// KubeAPIQPS and KubeAPIBurst are the client-side rate limit of the plugin's API
	// client (see DefaultKubeAPIQPS).
	KubeAPIQPS   float64
	KubeAPIBurst int
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

// DataDir is the plugin data directory: the DRA socket, the checkpoint and its lock.
func (c Config) DataDir() string { return filepath.Join(c.PluginsDir, c.DriverName) }

// KeysAndValues lists the whole configuration for the startup log line.
func (c Config) KeysAndValues() []any {
	return append([]any{
		"version", version.String(),
		"nodeName", c.NodeName, "driverName", c.DriverName,
		"sysfsRoot", c.SysfsRoot, "devRoot", c.DevRoot, "cdiRoot", c.CDIRoot,
		"registrarDir", c.RegistrarDir, "pluginsDir", c.PluginsDir, "dataDir", c.DataDir(),
		"podUID", c.PodUID, "rollingUpdate", c.PodUID != "",
		"healthcheckPort", c.HealthcheckPort, "healthcheckBindAddress", c.HealthcheckBindAddress, "metricsAddress", c.MetricsAddress,
		"nodeConfig", c.NodeConfig, "rescanInterval", c.RescanInterval, "cleanupInterval", c.CleanupInterval,
		"model", c.Model, "healthPollInterval", c.HealthPollInterval, "taintEffect", c.TaintEffect,
		"maxRepublishPerMinute", c.MaxRepublishPerMinute, "nodeEvents", c.NodeEvents,
		"hookInstallDir", c.HookInstallDir, "hookSource", c.HookSource,
		"kubeconfig", c.Kubeconfig, "netlink", c.Netlink, "bootIDPath", c.BootIDPath,
		"prepareHoldFile", c.PrepareHoldFile,
		"namespace", c.Namespace, "daemonSetName", c.DaemonSetName,
		"kubeAPIQPS", c.KubeAPIQPS, "kubeAPIBurst", c.KubeAPIBurst,
		"networkAttachment", c.NetworkAttachment, "deviceMetadata", c.DeviceMetadata, "deviceMetadataDir", c.MetadataDir(), "readyFile", c.ReadyFile, "nriSocket", c.NRISocket, "rdmaKernel", c.RDMAKernel, "nodeIPs", c.NodeIPs,
		"statusAPIQPS", c.StatusAPIQPS, "statusAPIBurst", c.StatusAPIBurst,
	}, c.MetricsAuth.KeysAndValues()...)
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
	if _, err := ParseModel(string(c.Model)); err != nil {
		errs = append(errs, err)
	}
	if c.HealthPollInterval <= 0 {
		errs = append(errs, fmt.Errorf("--health-poll-interval must be positive, got %s", c.HealthPollInterval))
	}
	if _, err := ParseTaintEffect(string(c.TaintEffect)); err != nil {
		errs = append(errs, fmt.Errorf("--taint-effect: %w", err))
	}
	if err := health.ValidateMaxPerMinute(c.MaxRepublishPerMinute); err != nil {
		errs = append(errs, fmt.Errorf("--max-republish-per-minute: %w", err))
	}
	if c.KubeAPIQPS <= 0 {
		errs = append(errs, fmt.Errorf("--kube-api-qps must be positive, got %g", c.KubeAPIQPS))
	}
	if c.KubeAPIBurst < 1 {
		errs = append(errs, fmt.Errorf("--kube-api-burst must be at least 1, got %d", c.KubeAPIBurst))
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

// Run runs the kubelet plugin until ctx ends or an error stops it.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger.Info("Starting kubelet plugin", cfg.KeysAndValues()...)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	kube, err := newKubeClient(cfg.Kubeconfig, cfg.KubeAPIQPS, cfg.KubeAPIBurst)
	if err != nil {
		return err
	}
	// Claim status has a rate limiter of its own: on the shared client its writes would
	// queue in front of the helper's GET of every claim the kubelet prepares.
	statusKube, err := newKubeClient(cfg.Kubeconfig, cfg.StatusAPIQPS, cfg.StatusAPIBurst)
	if err != nil {
		return err
	}
	nodeCfg := nodeconfig.Default()
	if cfg.NodeConfig != "" {
		if nodeCfg, err = nodeconfig.Load(cfg.NodeConfig); err != nil {
			return fmt.Errorf("load node configuration: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.DataDir(), 0o750); err != nil {
		return fmt.Errorf("create plugin data directory: %w", err)
	}
	if cfg.DeviceMetadata {
		if err := placeMetadata(cfg.DataDir(), cfg.MetadataDir()); err != nil {
			return err
		}
	}
	hookPath, err := installHook(ctx, cfg)
	if err != nil {
		return err
	}
	m := metrics.NewPlugin()
	realClock := clock.RealClock{}
	monitor, err := newMonitor(ctx, cfg, kube, m, realClock)
	if err != nil {
		return err
	}
	limiter, err := health.NewLimiter(realClock, cfg.MaxRepublishPerMinute)
	if err != nil {
		return err
	}
	publisher := NewPublisher(
		discovery.New(discovery.Options{SysfsRoot: cfg.SysfsRoot, UseNetlink: cfg.Netlink}),
		devicemodel.Options{DriverName: cfg.DriverName, NodeName: cfg.NodeName, Config: nodeCfg},
		cfg.Model, PublisherOptions{Metrics: m, Clock: realClock, Limiter: limiter, Observer: monitor, TaintEffect: cfg.TaintEffect})
	// The first scan happens before the kubelet can call: prepare needs the devices.
	if err := publisher.Sync(ctx); err != nil {
		return err
	}
	netOpts, netOff, err := networkOptions(ctx, cfg, &nodeCfg)
	if err != nil {
		return err
	}
	store := checkpoint.NewStore(cfg.DataDir(), cfg.BootIDPath)
	specOpts := cdi.Options{DriverName: cfg.DriverName, SpecDir: cfg.CDIRoot, DevRoot: cfg.DevRoot, HookPath: hookPath}
	if netOpts != nil {
		// Containers of pods with attachments wait for them (pkg/attachmark).
		specOpts.AttachedDir = netOpts.MarkDir
	}
	specs := cdi.NewWriter(specOpts)
	driver, err := NewDriver(ctx, DriverOptions{
		DriverName:       cfg.DriverName,
		NodeName:         cfg.NodeName,
		Kube:             kube,
		StatusKube:       statusKube,
		Store:            store,
		Specs:            specs,
		Devices:          publisher,
		Health:           monitor,
		Metrics:          m,
		Fatal:            func(err error) { stop(err) },
		OnDroppedFields:  publisher.HandleDroppedFields,
		Hold:             NewFailpoint(cfg.PrepareHoldFile),
		DeviceCounts:     publisher.DeviceCounts,
		Network:          netOpts,
		NetworkOffReason: netOff,
		NetnsExclusive:   publisher.NetnsExclusive,
		MetadataFiles:    metadataFiles(cfg),
	})
	if err != nil {
		return err
	}

	opts := []kubeletplugin.Option{
		kubeletplugin.DriverName(cfg.DriverName),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.KubeClient(kube),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistrarDir),
		kubeletplugin.PluginDataDirectoryPath(cfg.DataDir()),
		// Device health goes to the kubelet (pod status allocatedResourcesStatus).
		kubeletplugin.HealthService(true),
		// The driver locks per claim and reserves devices in the checkpoint's group
		// commit (claimlock.go), also across the instances of a rolling update, so calls
		// for different claims run at the same time instead of queueing behind each
		// other's file writes and API calls.
		kubeletplugin.Serialize(false),
	}
	if cfg.DeviceMetadata {
		opts = append(opts, deviceMetadataOptions(cfg.CDIRoot)...)
	}
	if cfg.PodUID != "" {
		opts = append(opts, kubeletplugin.RollingUpdate(types.UID(cfg.PodUID)))
	}
	socket, err := draSocketName(cfg.DataDir(), cfg.PodUID)
	if err != nil {
		return err
	}
	opts = append(opts, kubeletplugin.PluginSocket(socket))
	helper, err := kubeletplugin.Start(ctx, driver, opts...)
	if err != nil {
		return fmt.Errorf("start kubelet plugin helper: %w", err)
	}
	defer helper.Stop()
	publisher.SetSink(helper)
	if cfg.DeviceMetadata {
		driver.SetMetadataWriter(helper)
	}
	if err := publisher.Sync(ctx); err != nil {
		return err
	}
	// Startup (package initialization, the first scan, the helper's informers filling
	// up) leaves garbage that an idle plugin would otherwise keep resident until the
	// runtime's background scavenger gets to it; one forced collection that returns the
	// free pages to the kernel costs a few milliseconds once.
	debug.FreeOSMemory()

	if cfg.ReadyFile != "" {
		go KeepReadyFile(ctx, cfg.ReadyFile, helper)
	}
	go monitor.Run(ctx)
	go publisher.Run(ctx, monitor)
	go driver.RunCleanup(ctx, realClock, cfg.CleanupInterval)
	go driver.RunStatusWriter(ctx)
	if net := driver.NetworkAttachment(); net != nil {
		go net.RunNRI(ctx, nriPluginName(cfg))
	}
	if cfg.HealthcheckPort >= 0 {
		// The chart's probe names the host (127.0.0.1): with hostNetwork the kubelet
		// shares the plugin's network namespace, and nothing else needs the port.
		addr := net.JoinHostPort(cfg.HealthcheckBindAddress, strconv.Itoa(cfg.HealthcheckPort))
		go func() {
			if err := ServeLiveness(ctx, addr, helper); err != nil {
				stop(err)
			}
		}()
	}
	if cfg.MetricsAddress != "" {
		go func() {
			if err := serveMetrics(ctx, cfg, m.Handler()); err != nil {
				stop(err)
			}
		}()
	}
	logger.Info("Kubelet plugin is running")
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	logger.Info("Shutting down")
	helper.Stop()
	cleanupIfUninstalled(ctx, cfg, kube, hookPath, store, specs)
	return nil
}

// newMonitor returns the health monitor of the node: rtnetlink when cfg.Netlink, Node
// events when cfg.NodeEvents. Events go out through a broadcaster that lives as long as
// ctx.
func newMonitor(ctx context.Context, cfg Config, kube kubernetes.Interface, m *metrics.Plugin, c clock.WithTicker) (*health.Monitor, error) {
	opts := health.Options{
		SysfsRoot:      cfg.SysfsRoot,
		PollInterval:   cfg.HealthPollInterval,
		RescanInterval: cfg.RescanInterval,
		Clock:          c,
		NodeName:       cfg.NodeName,
		Metrics:        m,
	}
	if cfg.Netlink {
		opts.Links = health.NetlinkSource{}
	}
	if cfg.NodeEvents {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
		go func() {
			<-ctx.Done()
			broadcaster.Shutdown()
		}()
		opts.Recorder = broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventComponent, Host: cfg.NodeName})
	}
	monitor, err := health.New(opts)
	if err != nil {
		return nil, fmt.Errorf("create health monitor: %w", err)
	}
	return monitor, nil
}

// EventComponent is the source component of the plugin's events.
const EventComponent = "rdma-dra-kubeletplugin"

// installHook installs the memlock hook and returns its path, or "" when the binary is
// missing: only claims that ask for a memlock limit need it, and they fail with a clear
// message rather than the whole node.
func installHook(ctx context.Context, cfg Config) (string, error) {
	source := cfg.HookSource
	if source == "" {
		var err error
		if source, err = DefaultHookSource(); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(source); errors.Is(err, os.ErrNotExist) && cfg.HookSource == "" {
		klog.FromContext(ctx).Error(err, "Memlock hook binary not found next to the plugin; claims that set memlock will fail", "source", source)
		return "", nil
	}
	path, err := InstallHook(ctx, source, cfg.HookInstallDir, cdi.HookFileName(cfg.DriverName))
	if err != nil {
		return "", fmt.Errorf("install memlock hook: %w", err)
	}
	return path, nil
}

// newKubeClient returns the plugin's API client with the given client-side rate limit.
func newKubeClient(kubeconfig string, qps float64, burst int) (kubernetes.Interface, error) {
	var rc *rest.Config
	var err error
	if kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client configuration: %w", err)
	}
	rc.UserAgent = "rdma-dra-kubeletplugin/" + version.Version
	rc.QPS, rc.Burst = float32(qps), burst
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("create Kubernetes client: %w", err)
	}
	return client, nil
}

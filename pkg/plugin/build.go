package plugin

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/fabric"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
	"github.com/rdma-dra/rdma-dra-driver/pkg/porttable"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// components are the parts of one kubelet plugin process, made by build from a Config
// in the order of buildSteps and run by run (run.go). A step reads only what the steps
// before it made.
type components struct {
	cfg Config
	// fatal stops the plugin with an error that retrying cannot fix (DriverOptions.Fatal).
	fatal func(error)
	clock clock.WithTicker

	// Made by newComponents: nothing there can fail.
	metrics *metrics.Plugin
	// counters are the published ports' counters: served on /metrics (portstats.go) and
	// polled for flapping links by the monitor, which tells the reader the ports after
	// every scan.
	counters *portcounters.Reader
	stats    *portStats

	kube, statusKube kubernetes.Interface
	nodeCfg          nodeconfig.Config
	hookPath         string
	monitor          *health.Monitor
	publisher        *publish.Publisher
	network          *NetworkOptions
	networkOff       string
	store            *checkpoint.Store
	specs            *cdi.Writer
	fabricChecker    PortChecker
	fabricGate       *FabricGate
	driver           *Driver
	helper           *kubeletplugin.Helper
}

// newComponents returns the components of cfg before build: the metrics and the port
// counters they serve. fatal stops the plugin (DriverOptions.Fatal).
func newComponents(cfg Config, fatal func(error)) *components {
	c := &components{cfg: cfg, fatal: fatal, clock: clock.RealClock{}, metrics: metrics.NewPlugin()}
	c.counters = portcounters.NewReader(cfg.SysfsRoot)
	c.stats = newPortStats(c.counters, c.metrics, c.clock)
	c.metrics.ServePortCounters(cfg.NodeName, c.stats)
	return c
}

// buildStep is one step of build; what names it in the error when it fails.
type buildStep struct {
	what string
	do   func(context.Context) error
}

// buildSteps are the steps of build, in order.
func (c *components) buildSteps() []buildStep {
	return []buildStep{
		{"create API clients", c.buildClients},
		{"load node configuration", c.loadNodeConfig},
		{"create plugin data directory", c.makeDataDir},
		{"set up device metadata directory", c.placeMetadata},
		{"install memlock hook", c.installHook},
		{"create health monitor", c.buildMonitor},
		{"create ResourceSlice publisher", c.buildPublisher},
		// The first scan happens before the kubelet can call: prepare needs the devices.
		{"scan the node", c.scan},
		{"configure network attachment", c.buildNetwork},
		{"create CDI spec writer and checkpoint", c.buildSpecs},
		{"configure fabric readiness", c.buildFabric},
		{"create driver", c.buildDriver},
		{"start kubelet plugin helper", c.startHelper},
		{"publish ResourceSlices", c.publish},
	}
}

// build makes the components; the error names the step that failed. A helper that was
// started before a later step failed is the caller's to stop.
func (c *components) build(ctx context.Context) error {
	for _, s := range c.buildSteps() {
		if err := s.do(ctx); err != nil {
			return fmt.Errorf("%s: %w", s.what, err)
		}
	}
	return nil
}

// buildClients makes the API clients. Claim status has a rate limiter of its own: on the
// shared client its writes would queue in front of the helper's GET of every claim the
// kubelet prepares.
func (c *components) buildClients(context.Context) error {
	var err error
	if c.kube, err = c.cfg.KubeClient.Clientset(Component); err != nil {
		return err
	}
	if c.statusKube, err = c.cfg.KubeClient.WithRateLimit(c.cfg.StatusAPIQPS, c.cfg.StatusAPIBurst).Clientset(Component); err != nil {
		return fmt.Errorf("claim status client: %w", err)
	}
	return nil
}

// loadNodeConfig reads --node-config, or takes the defaults without one.
func (c *components) loadNodeConfig(context.Context) error {
	if c.cfg.NodeConfig == "" {
		c.nodeCfg = nodeconfig.Default()
		return nil
	}
	var err error
	c.nodeCfg, err = nodeconfig.Load(c.cfg.NodeConfig)
	return err
}

func (c *components) makeDataDir(context.Context) error {
	return os.MkdirAll(c.cfg.DataDir(), 0o750)
}

// placeMetadata puts the device metadata directory in place when --device-metadata is on.
func (c *components) placeMetadata(context.Context) error {
	if !c.cfg.DeviceMetadata {
		return nil
	}
	return placeMetadata(c.cfg.DataDir(), c.cfg.MetadataDir())
}

func (c *components) installHook(ctx context.Context) error {
	var err error
	c.hookPath, err = installHook(ctx, c.cfg)
	return err
}

func (c *components) buildMonitor(ctx context.Context) error {
	var err error
	c.monitor, err = newMonitor(ctx, c.cfg, c.nodeCfg, c.kube, c.metrics, c.counters, c.clock)
	return err
}

func (c *components) buildPublisher(context.Context) error {
	limiter, err := health.NewLimiter(c.clock, c.cfg.MaxRepublishPerMinute)
	if err != nil {
		return err
	}
	c.publisher = publish.New(
		discovery.New(discovery.Options{SysfsRoot: c.cfg.SysfsRoot, UseNetlink: c.cfg.UseNetlink()}),
		devicemodel.Options{DriverName: c.cfg.DriverName, NodeName: c.cfg.NodeName, Config: c.nodeCfg},
		c.cfg.Model, publish.Options{Metrics: c.metrics, Clock: c.clock, Limiter: limiter, Observer: c.monitor,
			TaintEffect: c.cfg.TaintEffect, Flapping: c.monitor.Flapping})
	return nil
}

func (c *components) scan(ctx context.Context) error {
	return c.publisher.Sync(ctx)
}

// buildNetwork configures the network attachment, or records why there is none.
func (c *components) buildNetwork(ctx context.Context) error {
	var err error
	c.network, c.networkOff, err = networkOptions(ctx, c.cfg, &c.nodeCfg)
	if err != nil {
		return err
	}
	if c.network != nil && c.cfg.Namespace != "" {
		// Static pod addresses are reserved in the plugin's namespace, one Lease each.
		c.network.Addresses = &addrlease.Reserver{Kube: c.kube, Namespace: c.cfg.Namespace, Node: c.cfg.NodeName}
	}
	return nil
}

func (c *components) buildSpecs(context.Context) error {
	c.store = checkpoint.NewStore(c.cfg.DataDir(), c.cfg.BootIDPath)
	opts := cdi.Options{DriverName: c.cfg.DriverName, SpecDir: c.cfg.CDIRoot, DevRoot: c.cfg.DevRoot, HookPath: c.hookPath,
		PortTables: porttable.New(c.cfg.SysfsRoot), TopologyDir: c.cfg.TopologyDir()}
	if c.network != nil {
		// Containers of pods with attachments wait for them (pkg/attachmark).
		opts.AttachedDir = c.network.MarkDir
	}
	c.specs = cdi.NewWriter(opts)
	return nil
}

func (c *components) buildFabric(context.Context) error {
	c.fabricChecker, c.fabricGate = fabricReadiness(c.cfg, c.nodeCfg, c.kube, c.statusKube, c.publisher, c.clock)
	return nil
}

func (c *components) buildDriver(ctx context.Context) error {
	var err error
	c.driver, err = NewDriver(ctx, DriverOptions{
		DriverName:       c.cfg.DriverName,
		NodeName:         c.cfg.NodeName,
		Kube:             c.kube,
		StatusKube:       c.statusKube,
		Store:            c.store,
		Specs:            c.specs,
		Devices:          c.publisher,
		Health:           c.monitor,
		Metrics:          c.metrics,
		Fatal:            c.fatal,
		OnDroppedFields:  c.publisher.HandleDroppedFields,
		Hold:             NewFailpoint(c.cfg.PrepareHoldFile),
		DeviceCounts:     c.publisher.DeviceCounts,
		Committed:        c.stats.committed,
		Network:          c.network,
		NetworkOffReason: c.networkOff,
		NetnsExclusive:   c.publisher.NetnsExclusive,
		MetadataFiles:    metadataFiles(c.cfg),
		Fabric:           c.fabricChecker,
		Topology:         &TopologySource{SysfsRoot: c.cfg.SysfsRoot, Kube: c.kube, NodeName: c.cfg.NodeName},
		FabricGate:       c.fabricGate,
	})
	return err
}

// helperOptions are the kubelet plugin helper's options for cfg.
func helperOptions(cfg Config, kube kubernetes.Interface) ([]kubeletplugin.Option, error) {
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
		return nil, err
	}
	return append(opts, kubeletplugin.PluginSocket(socket)), nil
}

// startHelper starts the kubelet plugin helper, which registers the plugin with the
// kubelet, and connects the publisher and the device metadata to it.
func (c *components) startHelper(ctx context.Context) error {
	opts, err := helperOptions(c.cfg, c.kube)
	if err != nil {
		return err
	}
	if c.helper, err = kubeletplugin.Start(ctx, c.driver, opts...); err != nil {
		return err
	}
	c.publisher.SetSink(c.helper)
	if c.cfg.DeviceMetadata {
		c.driver.SetMetadataWriter(c.helper)
	}
	return nil
}

// publish publishes the first scan's slices through the helper.
func (c *components) publish(ctx context.Context) error {
	if err := c.publisher.Sync(ctx); err != nil {
		return err
	}
	// Startup (package initialization, the first scan, the helper's informers filling
	// up) leaves garbage that an idle plugin would otherwise keep resident until the
	// runtime's background scavenger gets to it; one forced collection that returns the
	// free pages to the kernel costs a few milliseconds once.
	debug.FreeOSMemory()
	return nil
}

// newMonitor returns the health monitor of the node: rtnetlink when cfg.UseNetlink, Node
// events when cfg.NodeEvents. Events go out through a broadcaster that lives as long as
// ctx.
func newMonitor(ctx context.Context, cfg Config, nodeCfg nodeconfig.Config, kube kubernetes.Interface, m *metrics.Plugin, counters health.CounterReader, c clock.WithTicker) (*health.Monitor, error) {
	opts := health.Options{
		SysfsRoot:      cfg.SysfsRoot,
		PollInterval:   cfg.HealthPollInterval,
		RescanInterval: cfg.RescanInterval,
		Clock:          c,
		NodeName:       cfg.NodeName,
		Metrics:        m,
		Counters:       counters,
		Flapping:       health.FlapOptionsFrom(nodeCfg.Health.Flapping),
	}
	if cfg.UseNetlink() {
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
	return health.New(opts)
}

// fabricReadiness returns the port checker and the binding-condition gate of the ports
// that the node configuration gates (docs/kubelet-plugin.md, Fabric readiness), or nils
// when it gates none: then the plugin does not watch claims at all.
func fabricReadiness(cfg Config, nodeCfg nodeconfig.Config, kube, statusKube kubernetes.Interface, devices DeviceLookup, c clock.WithTicker) (PortChecker, *FabricGate) {
	if !nodeCfg.FabricReadiness.Enabled {
		return nil, nil
	}
	checker := fabric.New(cfg.SysfsRoot)
	return checker, NewFabricGate(FabricGateOptions{
		DriverName:    cfg.DriverName,
		PoolName:      devicemodel.DefaultPoolName(cfg.NodeName, cfg.DriverName),
		Kube:          kube,
		StatusKube:    statusKube,
		Devices:       devices,
		Checker:       checker,
		Timeout:       nodeCfg.FabricReadiness.Timeout(),
		RetryInterval: cfg.HealthPollInterval,
		Clock:         c,
	})
}

// EventComponent is the source component of the plugin's events.
const EventComponent = Component

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
	return InstallHook(ctx, source, cfg.HookInstallDir, cdi.HookFileName(cfg.DriverName))
}

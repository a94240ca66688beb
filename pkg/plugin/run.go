package plugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"strconv"

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

// Run runs the kubelet plugin until ctx ends or an error stops it.
func Run(ctx context.Context, cfg Config) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Validate(); err != nil {
		return err
	}
	logger.Info("Starting kubelet plugin", cfg.KeysAndValues()...)
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)

	kube, err := cfg.KubeClient.Clientset(Component)
	if err != nil {
		return err
	}
	// Claim status has a rate limiter of its own: on the shared client its writes would
	// queue in front of the helper's GET of every claim the kubelet prepares.
	statusKube, err := cfg.KubeClient.WithRateLimit(cfg.StatusAPIQPS, cfg.StatusAPIBurst).Clientset(Component)
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
	// The published ports' counters: served on /metrics (portstats.go) and polled for
	// flapping links by the monitor, which tells the reader the ports after every scan.
	counters := portcounters.NewReader(cfg.SysfsRoot)
	stats := newPortStats(counters, m, realClock)
	m.ServePortCounters(cfg.NodeName, stats)
	monitor, err := newMonitor(ctx, cfg, nodeCfg, kube, m, counters, realClock)
	if err != nil {
		return err
	}
	limiter, err := health.NewLimiter(realClock, cfg.MaxRepublishPerMinute)
	if err != nil {
		return err
	}
	publisher := publish.New(
		discovery.New(discovery.Options{SysfsRoot: cfg.SysfsRoot, UseNetlink: cfg.UseNetlink()}),
		devicemodel.Options{DriverName: cfg.DriverName, NodeName: cfg.NodeName, Config: nodeCfg},
		cfg.Model, publish.Options{Metrics: m, Clock: realClock, Limiter: limiter, Observer: monitor, TaintEffect: cfg.TaintEffect, Flapping: monitor.Flapping})
	// The first scan happens before the kubelet can call: prepare needs the devices.
	if err := publisher.Sync(ctx); err != nil {
		return err
	}
	netOpts, netOff, err := networkOptions(ctx, cfg, &nodeCfg)
	if err != nil {
		return err
	}
	if netOpts != nil && cfg.Namespace != "" {
		// Static pod addresses are reserved in the plugin's namespace, one Lease each.
		netOpts.Addresses = &addrlease.Reserver{Kube: kube, Namespace: cfg.Namespace, Node: cfg.NodeName}
	}
	store := checkpoint.NewStore(cfg.DataDir(), cfg.BootIDPath)
	specOpts := cdi.Options{DriverName: cfg.DriverName, SpecDir: cfg.CDIRoot, DevRoot: cfg.DevRoot, HookPath: hookPath,
		PortTables: porttable.New(cfg.SysfsRoot), TopologyDir: cfg.TopologyDir()}
	if netOpts != nil {
		// Containers of pods with attachments wait for them (pkg/attachmark).
		specOpts.AttachedDir = netOpts.MarkDir
	}
	specs := cdi.NewWriter(specOpts)
	fabricChecker, fabricGate := fabricReadiness(cfg, nodeCfg, kube, statusKube, publisher, realClock)
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
		Committed:        stats.committed,
		Network:          netOpts,
		NetworkOffReason: netOff,
		NetnsExclusive:   publisher.NetnsExclusive,
		MetadataFiles:    metadataFiles(cfg),
		Fabric:           fabricChecker,
		Topology:         &TopologySource{SysfsRoot: cfg.SysfsRoot, Kube: kube, NodeName: cfg.NodeName},
		FabricGate:       fabricGate,
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
	if fabricGate != nil {
		go fabricGate.Run(ctx)
	}
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
	monitor, err := health.New(opts)
	if err != nil {
		return nil, fmt.Errorf("create health monitor: %w", err)
	}
	return monitor, nil
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
	path, err := InstallHook(ctx, source, cfg.HookInstallDir, cdi.HookFileName(cfg.DriverName))
	if err != nil {
		return "", fmt.Errorf("install memlock hook: %w", err)
	}
	return path, nil
}

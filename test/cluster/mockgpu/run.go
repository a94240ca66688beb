package mockgpu

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"
)

// Config is what the plugin needs to run, one field per flag of cmd/mockgpu.
type Config struct {
	// NodeName is the node the plugin runs on; its pool is PoolName(NodeName).
	NodeName string
	// SysfsRoot is the sysfs tree whose GPUs are published (Discover).
	SysfsRoot string
	// CDIRoot is the CDI spec directory the container runtime reads.
	CDIRoot string
	// KubeletRoot is the kubelet's root directory: the registration socket goes into
	// plugins_registry/, the DRA socket into plugins/<DriverName>/.
	KubeletRoot string
}

// RegistrarDir is the kubelet's plugin registration directory.
func (c Config) RegistrarDir() string { return filepath.Join(c.KubeletRoot, "plugins_registry") }

// DataDir is the plugin's directory under the kubelet's plugins directory.
func (c Config) DataDir() string { return filepath.Join(c.KubeletRoot, "plugins", DriverName) }

// Validate names every field that is missing or not an absolute path.
func (c Config) Validate() error {
	var errs []error
	if c.NodeName == "" {
		errs = append(errs, errors.New("--node-name is required"))
	}
	for _, p := range []struct{ flag, value string }{
		{"--sysfs-root", c.SysfsRoot}, {"--cdi-root", c.CDIRoot}, {"--kubelet-root", c.KubeletRoot},
	} {
		if !filepath.IsAbs(p.value) {
			errs = append(errs, fmt.Errorf("%s must be an absolute path, got %q", p.flag, p.value))
		}
	}
	return errors.Join(errs...)
}

// Run discovers the GPUs once (a mock tree does not change under a running plugin; a
// new tree comes with a new pod), registers with the kubelet, publishes the node's pool
// and serves prepare and unprepare until ctx ends or the helper reports a fatal error.
func Run(ctx context.Context, cfg Config, kube kubernetes.Interface) error {
	logger := klog.FromContext(ctx)
	if err := cfg.Validate(); err != nil {
		return err
	}
	gpus, err := Discover(cfg.SysfsRoot)
	if err != nil {
		return fmt.Errorf("discover GPUs below %s: %w", cfg.SysfsRoot, err)
	}
	logger.Info("Discovered GPUs", "sysfsRoot", cfg.SysfsRoot, "count", len(gpus))
	for _, g := range gpus {
		logger.V(2).Info("GPU", "name", g.Name, "busID", g.BusID, "pcieRoot", g.PCIeRoot, "model", g.Model())
	}
	if err := os.MkdirAll(cfg.DataDir(), 0o750); err != nil {
		return fmt.Errorf("create plugin data directory: %w", err)
	}
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	driver := NewDriver(cfg.NodeName, gpus, cfg.CDIRoot, stop)
	helper, err := kubeletplugin.Start(ctx, driver,
		kubeletplugin.DriverName(DriverName),
		kubeletplugin.NodeName(cfg.NodeName),
		kubeletplugin.KubeClient(kube),
		kubeletplugin.RegistrarDirectoryPath(cfg.RegistrarDir()),
		kubeletplugin.PluginDataDirectoryPath(cfg.DataDir()),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		return fmt.Errorf("start kubelet plugin helper: %w", err)
	}
	defer helper.Stop()
	if err := helper.PublishResources(ctx, Resources(cfg.NodeName, gpus)); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	logger.Info("Mock GPU plugin is running", "driver", DriverName, "pool", PoolName(cfg.NodeName))
	<-ctx.Done()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return cause
	}
	logger.Info("Shutting down")
	return nil
}

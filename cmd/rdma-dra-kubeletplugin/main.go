// Command rdma-dra-kubeletplugin is the driver's kubelet plugin: it publishes the node's
// RDMA ports as ResourceSlices and prepares ResourceClaims for the kubelet.
package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/plugin"
)

func main() {
	cliflags.Main(newApp())
}

// flagValues are the raw flag values that need parsing into plugin.Config.
type flagValues struct {
	cfg         plugin.Config
	model       string
	netlink     string
	taintEffect string
	nodeIPs     string
}

func newApp() *cli.App {
	v := &flagValues{}
	app := cliflags.NewApp("rdma-dra-kubeletplugin",
		"publish a node's RDMA ports and prepare ResourceClaims for the kubelet", v.flags())
	app.Action = func(c *cli.Context) error {
		cfg, err := v.config()
		if err != nil {
			return err
		}
		return plugin.Run(c.Context, cfg)
	}
	app.Commands = []*cli.Command{{
		Name:  "ready",
		Usage: "exit 0 when the plugin of this container is registered with the kubelet (--ready-file is there): the readiness probe",
		Action: func(c *cli.Context) error {
			if c.Args().Present() {
				return fmt.Errorf("ready takes no arguments, got %q", c.Args().Slice())
			}
			return plugin.CheckReady(v.cfg.ReadyFile)
		},
	}}
	return app
}

func (v *flagValues) flags() []cli.Flag {
	c := &v.cfg
	return append([]cli.Flag{
		&cli.StringFlag{Name: "node-name", Usage: "the node this plugin runs on (required)", EnvVars: []string{"NODE_NAME"}, Destination: &c.NodeName},
		&cli.StringFlag{Name: "driver-name", Usage: "the DRA driver name", Value: devicemodel.DefaultDriverName, EnvVars: []string{"DRIVER_NAME"}, Destination: &c.DriverName},
		&cli.StringFlag{Name: "sysfs-root", Usage: "where sysfs is read from", Value: "/sys", EnvVars: []string{"SYSFS_ROOT"}, Destination: &c.SysfsRoot},
		&cli.StringFlag{Name: "dev-root", Usage: "the host's /dev as the container runtime sees it", Value: "/dev", EnvVars: []string{"DEV_ROOT"}, Destination: &c.DevRoot},
		&cli.StringFlag{Name: "cdi-root", Usage: "directory of the transient CDI specs", Value: "/var/run/cdi", EnvVars: []string{"CDI_ROOT"}, Destination: &c.CDIRoot},
		&cli.StringFlag{Name: "kubelet-registrar-directory-path", Usage: "the kubelet's plugin registration directory", Value: kubeletplugin.KubeletRegistryDir, EnvVars: []string{"KUBELET_REGISTRAR_DIRECTORY_PATH"}, Destination: &c.RegistrarDir},
		&cli.StringFlag{Name: "kubelet-plugins-directory-path", Usage: "the kubelet's plugin directory; the data directory is <this>/<driver-name>", Value: kubeletplugin.KubeletPluginsDir, EnvVars: []string{"KUBELET_PLUGINS_DIRECTORY_PATH"}, Destination: &c.PluginsDir},
		&cli.StringFlag{Name: "pod-uid", Usage: "the plugin pod's UID; enables rolling updates of the DaemonSet", EnvVars: []string{"POD_UID"}, Destination: &c.PodUID},
		&cli.IntFlag{Name: "healthcheck-port", Usage: "port of the liveness endpoint (HTTP /healthz: 200 once registered with the kubelet); -1 disables", Value: 51515, EnvVars: []string{"HEALTHCHECK_PORT"}, Destination: &c.HealthcheckPort},
		&cli.StringFlag{Name: "ready-file", Usage: "file kept present while the kubelet has this plugin registered, which the readiness probe (the ready command) checks; empty keeps none", EnvVars: []string{"READY_FILE"}, Destination: &c.ReadyFile, TakesFile: true},
		&cli.StringFlag{Name: "healthcheck-bind-address", Usage: "host the liveness port listens on; the default keeps it off the node's network (the kubelet probes 127.0.0.1); empty is every address", Value: "127.0.0.1", EnvVars: []string{"HEALTHCHECK_BIND_ADDRESS"}, Destination: &c.HealthcheckBindAddress},
		&cli.StringFlag{Name: "metrics-bind-address", Aliases: []string{"metrics-address"}, Usage: "listen address of /metrics (no authentication without --metrics-secure), e.g. 127.0.0.1:9472; on the host network :9472 is every node address; empty disables", EnvVars: []string{"METRICS_BIND_ADDRESS", "METRICS_ADDRESS"}, Destination: &c.MetricsAddress},
		&cli.StringFlag{Name: "node-config", Usage: "node configuration file; empty uses the defaults", EnvVars: []string{"NODE_CONFIG"}, Destination: &c.NodeConfig},
		&cli.DurationFlag{Name: "rescan-interval", Usage: "how often the node is scanned for changed ports", Value: 30 * time.Second, EnvVars: []string{"RESCAN_INTERVAL"}, Destination: &c.RescanInterval},
		&cli.DurationFlag{Name: "cleanup-interval", Usage: "how often leftovers of deleted claims are looked for", Value: 10 * time.Minute, EnvVars: []string{"CLEANUP_INTERVAL"}, Destination: &c.CleanupInterval},
		&cli.StringFlag{Name: "model", Usage: "device model: auto (partitionable, legacy where the API server drops its fields), partitionable or legacy", Value: string(plugin.ModelAuto), EnvVars: []string{"DEVICE_MODEL"}, Destination: &v.model},
		&cli.StringFlag{Name: "hook-install-dir", Usage: "host directory the memlock hook is copied to; must be mounted at the same path", Value: "/var/lib/rdma-dra/bin", EnvVars: []string{"HOOK_INSTALL_DIR"}, Destination: &c.HookInstallDir},
		&cli.StringFlag{Name: "hook-source", Usage: "the hook binary to install; default: " + cdi.HookBinary + " next to this executable", EnvVars: []string{"HOOK_SOURCE"}, Destination: &c.HookSource},
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty uses the in-cluster configuration", EnvVars: []string{"KUBECONFIG"}, Destination: &c.Kubeconfig},
		&cli.StringFlag{Name: "netlink", Usage: "ask netlink for the RDMA netns mode and watch netdevs through rtnetlink: auto (only when --sysfs-root is /sys), true or false", Value: "auto", EnvVars: []string{"NETLINK"}, Destination: &v.netlink},
		&cli.DurationFlag{Name: "health-poll-interval", Usage: "how often the state of every port and the list of RDMA devices are read; a change is republished within about this long", Value: health.DefaultPollInterval, EnvVars: []string{"HEALTH_POLL_INTERVAL"}, Destination: &c.HealthPollInterval},
		&cli.StringFlag{Name: "taint-effect", Usage: "effect of the taint of a port that is not ACTIVE: NoSchedule, NoExecute (evict the pods using it) or None", Value: string(resourceapi.DeviceTaintEffectNoSchedule), EnvVars: []string{"TAINT_EFFECT"}, Destination: &v.taintEffect},
		&cli.IntFlag{Name: "max-republish-per-minute", Usage: "damping: at most this many republishes after changes in any minute, half of them at once; the last state is always published; 0 disables", Value: health.DefaultMaxRepublishPerMinute, EnvVars: []string{"MAX_REPUBLISH_PER_MINUTE"}, Destination: &c.MaxRepublishPerMinute},
		&cli.BoolFlag{Name: "node-events", Usage: "record an Event on the Node when a port changes state, appears or disappears", Value: true, EnvVars: []string{"NODE_EVENTS"}, Destination: &c.NodeEvents},
		&cli.StringFlag{Name: "namespace", Usage: "the plugin pod's namespace (downward API metadata.namespace); with --daemonset-name: clean the node up when the DaemonSet is uninstalled", EnvVars: []string{"POD_NAMESPACE"}, Destination: &c.Namespace},
		&cli.StringFlag{Name: "daemonset-name", Usage: "the plugin's DaemonSet; with --namespace: clean the node up when it is uninstalled", EnvVars: []string{"DAEMONSET_NAME"}, Destination: &c.DaemonSetName},
		&cli.Float64Flag{Name: "kube-api-qps", Usage: "client-side rate limit of the plugin's API requests per second (sustained); the kubelet's default", Value: plugin.DefaultKubeAPIQPS, EnvVars: []string{"KUBE_API_QPS"}, Destination: &c.KubeAPIQPS},
		&cli.IntFlag{Name: "kube-api-burst", Usage: "client-side rate limit: API requests allowed at once above --kube-api-qps; the kubelet's default", Value: plugin.DefaultKubeAPIBurst, EnvVars: []string{"KUBE_API_BURST"}, Destination: &c.KubeAPIBurst},
		&cli.Float64Flag{Name: "status-api-qps", Usage: "client-side rate limit of claim status writes per second (sustained), a client of their own so that they never delay a prepare", Value: plugin.DefaultStatusAPIQPS, EnvVars: []string{"STATUS_API_QPS"}, Destination: &c.StatusAPIQPS},
		&cli.IntFlag{Name: "status-api-burst", Usage: "claim status writes allowed at once above --status-api-qps", Value: plugin.DefaultStatusAPIBurst, EnvVars: []string{"STATUS_API_BURST"}, Destination: &c.StatusAPIBurst},
		&cli.BoolFlag{Name: "network-attachment", Usage: "attach the networks that claims ask for (RoCE and IPoIB in pods) through the container runtime's NRI; claims that ask for it fail while NRI is not reachable", Value: true, EnvVars: []string{"NETWORK_ATTACHMENT"}, Destination: &c.NetworkAttachment},
		&cli.BoolFlag{Name: "device-metadata", Usage: "give containers the metadata of their devices (attributes, uverbs device, the pod's network) in files under /var/run/kubernetes.io/dra-device-attributes/ (KEP-5304), mounted through CDI", Value: true, EnvVars: []string{"DEVICE_METADATA"}, Destination: &c.DeviceMetadata},
		&cli.StringFlag{Name: "device-metadata-root", Usage: "host directory, on a tmpfs, that holds the device metadata files in <this>/<driver-name> (the data directory links to it); must be mounted at the same path; empty keeps them in the data directory, on its disk", Value: plugin.DefaultDeviceMetadataRoot, EnvVars: []string{"DEVICE_METADATA_ROOT"}, Destination: &c.DeviceMetadataRoot},
		&cli.StringFlag{Name: "nri-socket", Usage: "the container runtime's NRI socket", Value: plugin.DefaultNRISocket, EnvVars: []string{"NRI_SOCKET"}, Destination: &c.NRISocket},
		&cli.StringFlag{Name: "rdma-kernel", Usage: "sysfs (the node's RDMA subsystem) or emulated (a mock node: the plugin writes the GID entries of pod addresses into the mock sysfs tree)", Value: plugin.RDMAKernelSysfs, EnvVars: []string{"RDMA_KERNEL"}, Destination: &c.RDMAKernel},
		&cli.StringFlag{Name: "node-ips", Usage: "comma-separated addresses of the node (the kubelet's node IPs): network mode move never takes the netdev that carries one", EnvVars: []string{"NODE_IPS"}, Destination: &v.nodeIPs},
		&cli.StringFlag{Name: "boot-id-path", Usage: "the kernel's boot ID file, which invalidates the checkpoint after a reboot", Value: checkpoint.DefaultBootIDPath, EnvVars: []string{"BOOT_ID_PATH"}, Destination: &c.BootIDPath},
	}, cliflags.MetricsAuthFlags(&c.MetricsAuth, "the plugin's service account")...)
}

// config finishes the configuration: parsed choices and the test-only failpoint, which
// deliberately has no flag and is read from the environment only in a binary built with
// -tags failpoint.
func (v *flagValues) config() (plugin.Config, error) {
	cfg := v.cfg
	model, err := plugin.ParseModel(v.model)
	if err != nil {
		return cfg, fmt.Errorf("--model: %w", err)
	}
	cfg.Model = model
	effect, err := plugin.ParseTaintEffect(v.taintEffect)
	if err != nil {
		return cfg, fmt.Errorf("--taint-effect: %w", err)
	}
	cfg.TaintEffect = effect
	switch v.netlink {
	case "auto":
		cfg.Netlink = cfg.SysfsRoot == "/sys"
	case "true":
		cfg.Netlink = true
	case "false":
		cfg.Netlink = false
	default:
		return cfg, fmt.Errorf("--netlink must be auto, true or false, got %q", v.netlink)
	}
	for _, ip := range strings.Split(v.nodeIPs, ",") {
		if ip = strings.TrimSpace(ip); ip != "" {
			cfg.NodeIPs = append(cfg.NodeIPs, ip)
		}
	}
	cfg.PrepareHoldFile = plugin.PrepareHoldFile()
	return cfg, nil
}

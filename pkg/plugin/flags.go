package plugin

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/internal/version"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
	"github.com/rdma-dra/rdma-dra-driver/pkg/publish"
)

// Component names the plugin in its user agent and as the source of its events.
const Component = "rdma-dra-kubeletplugin"

// Flags declares the plugin's flags, each with its environment twin, bound to the fields
// of c; cliflags.NewApp adds the logging flags. It is the one list of them: the command
// line, the startup log line (KeysAndValues), the table in docs/kubelet-plugin.md and the
// chart's environment (deployments) are derived from it or checked against it.
func Flags(c *Config) []cli.Flag {
	flags := []cli.Flag{
		&cli.StringFlag{Name: "node-name", Usage: "the node this plugin runs on (required; downward API spec.nodeName)", EnvVars: []string{"NODE_NAME"}, Destination: &c.NodeName},
		&cli.StringFlag{Name: "driver-name", Usage: "the DRA driver name", Value: devicemodel.DefaultDriverName, EnvVars: []string{"DRIVER_NAME"}, Destination: &c.DriverName},
		&cli.StringFlag{Name: "sysfs-root", Usage: "where sysfs is read from (a mock node's DIR/sys in demos)", Value: "/sys", EnvVars: []string{"SYSFS_ROOT"}, Destination: &c.SysfsRoot, TakesFile: true},
		&cli.StringFlag{Name: "dev-root", Usage: "the host's /dev as the container runtime sees it; goes into the hostPaths of CDI specs", Value: "/dev", EnvVars: []string{"DEV_ROOT"}, Destination: &c.DevRoot, TakesFile: true},
		&cli.StringFlag{Name: "cdi-root", Usage: "directory of the transient CDI specs", Value: "/var/run/cdi", EnvVars: []string{"CDI_ROOT"}, Destination: &c.CDIRoot, TakesFile: true},
		&cli.StringFlag{Name: "kubelet-registrar-directory-path", Usage: "the kubelet's plugin registration directory", Value: kubeletplugin.KubeletRegistryDir, EnvVars: []string{"KUBELET_REGISTRAR_DIRECTORY_PATH"}, Destination: &c.RegistrarDir, TakesFile: true},
		&cli.StringFlag{Name: "kubelet-plugins-directory-path", Usage: "the kubelet's plugin directory; the data directory is <this>/<driver-name>", Value: kubeletplugin.KubeletPluginsDir, EnvVars: []string{"KUBELET_PLUGINS_DIRECTORY_PATH"}, Destination: &c.PluginsDir, TakesFile: true},
		&cli.StringFlag{Name: "pod-uid", Usage: "the plugin pod's UID (downward API metadata.uid); enables rolling updates of the DaemonSet (kubelet 1.33+)", EnvVars: []string{"POD_UID"}, Destination: &c.PodUID},
		&cli.IntFlag{Name: "healthcheck-port", Usage: "port of the liveness endpoint (HTTP /healthz: 200 once registered with the kubelet); -1 disables", Value: 51515, EnvVars: []string{"HEALTHCHECK_PORT"}, Destination: &c.HealthcheckPort},
		&cli.StringFlag{Name: "healthcheck-bind-address", Usage: "host the liveness port listens on; the default keeps it off the node's network (the kubelet probes 127.0.0.1); empty is every address", Value: "127.0.0.1", EnvVars: []string{"HEALTHCHECK_BIND_ADDRESS"}, Destination: &c.HealthcheckBindAddress},
		&cli.StringFlag{Name: "ready-file", Usage: "file kept present while the kubelet has this plugin registered, which the readiness probe (the ready command) checks; empty keeps none", EnvVars: []string{"READY_FILE"}, Destination: &c.ReadyFile, TakesFile: true},
		&cli.StringFlag{Name: "metrics-bind-address", Aliases: []string{"metrics-address"}, Usage: "listen address of /metrics (no authentication without --metrics-secure), e.g. 127.0.0.1:9472 (the chart's default); on the host network :9472 is every node address; empty disables", EnvVars: []string{"METRICS_BIND_ADDRESS", "METRICS_ADDRESS"}, Destination: &c.MetricsAddress},
	}
	flags = append(flags, cliflags.MetricsAuthFlags(&c.MetricsAuth, "the plugin's service account")...)
	flags = append(flags,
		&cli.StringFlag{Name: "node-config", Usage: "node configuration file; empty uses the defaults", EnvVars: []string{"NODE_CONFIG"}, Destination: &c.NodeConfig, TakesFile: true},
		&cli.DurationFlag{Name: "rescan-interval", Usage: "how often the node is scanned fully for changed ports; slices are republished only when the inventory changed", Value: 30 * time.Second, EnvVars: []string{"RESCAN_INTERVAL"}, Destination: &c.RescanInterval},
		&cli.DurationFlag{Name: "health-poll-interval", Usage: "how often the state of every port and the list of RDMA devices are read; a change is republished within about this long", Value: health.DefaultPollInterval, EnvVars: []string{"HEALTH_POLL_INTERVAL"}, Destination: &c.HealthPollInterval},
		&cli.StringFlag{Name: "taint-effect", Usage: "effect of the taint of a port that is not ACTIVE: NoSchedule, NoExecute (evict the pods using it) or None", Value: string(resourceapi.DeviceTaintEffectNoSchedule), EnvVars: []string{"TAINT_EFFECT"}, Destination: (*string)(&c.TaintEffect)},
		&cli.IntFlag{Name: "max-republish-per-minute", Usage: "damping: at most this many republishes after changes in any minute, half of them at once; the last state is always published; 0 disables, otherwise at least 2", Value: health.DefaultMaxRepublishPerMinute, EnvVars: []string{"MAX_REPUBLISH_PER_MINUTE"}, Destination: &c.MaxRepublishPerMinute},
		&cli.BoolFlag{Name: "node-events", Usage: "record an Event on the Node when a port changes state, appears or disappears", Value: true, EnvVars: []string{"NODE_EVENTS"}, Destination: &c.NodeEvents},
		&cli.DurationFlag{Name: "cleanup-interval", Usage: "how often leftovers of deleted claims are looked for (first at start)", Value: 10 * time.Minute, EnvVars: []string{"CLEANUP_INTERVAL"}, Destination: &c.CleanupInterval},
		&cli.StringFlag{Name: "model", Usage: "device model: auto (partitionable, legacy on this node where the API server drops its fields), partitionable or legacy", Value: string(publish.ModelAuto), EnvVars: []string{"DEVICE_MODEL"}, Destination: (*string)(&c.Model)},
		&cli.StringFlag{Name: "hook-install-dir", Usage: "host directory the memlock hook is copied to at start; must be mounted at the same path", Value: "/var/lib/rdma-dra/bin", EnvVars: []string{"HOOK_INSTALL_DIR"}, Destination: &c.HookInstallDir, TakesFile: true},
		&cli.StringFlag{Name: "hook-source", Usage: "the hook binary to install; empty: " + cdi.HookBinary + " next to this executable", EnvVars: []string{"HOOK_SOURCE"}, Destination: &c.HookSource, TakesFile: true},
	)
	flags = append(flags, c.KubeClient.Flags(cliflags.KubeClient{QPS: DefaultKubeAPIQPS, Burst: DefaultKubeAPIBurst})...)
	flags = append(flags,
		&cli.Float64Flag{Name: "status-api-qps", Usage: "client-side rate limit of claim status writes per second (sustained), a client of their own so that they never delay a prepare", Value: DefaultStatusAPIQPS, EnvVars: []string{"STATUS_API_QPS"}, Destination: &c.StatusAPIQPS},
		&cli.IntFlag{Name: "status-api-burst", Usage: "claim status writes allowed at once above --status-api-qps", Value: DefaultStatusAPIBurst, EnvVars: []string{"STATUS_API_BURST"}, Destination: &c.StatusAPIBurst},
		&cli.StringFlag{Name: "netlink", Usage: "ask netlink for the RDMA netns mode and watch netdevs through rtnetlink: auto (only when --sysfs-root is /sys), true or false", Value: "auto", EnvVars: []string{"NETLINK"}, Destination: &c.Netlink},
		&cli.StringFlag{Name: "namespace", Usage: "the plugin pod's namespace (downward API metadata.namespace); with --daemonset-name: clean the node up when the DaemonSet is uninstalled", EnvVars: []string{"POD_NAMESPACE"}, Destination: &c.Namespace},
		&cli.StringFlag{Name: "daemonset-name", Usage: "the plugin's DaemonSet; with --namespace: clean the node up when it is uninstalled", EnvVars: []string{"DAEMONSET_NAME"}, Destination: &c.DaemonSetName},
		&cli.StringFlag{Name: "boot-id-path", Usage: "the kernel's boot ID file, which invalidates the checkpoint after a reboot", Value: checkpoint.DefaultBootIDPath, EnvVars: []string{"BOOT_ID_PATH"}, Destination: &c.BootIDPath, TakesFile: true},
		&cli.BoolFlag{Name: "device-metadata", Usage: "give containers the metadata of their devices (attributes, uverbs device, the pod's network) in files under /var/run/kubernetes.io/dra-device-attributes/ (KEP-5304), mounted through CDI", Value: true, EnvVars: []string{"DEVICE_METADATA"}, Destination: &c.DeviceMetadata},
		&cli.StringFlag{Name: "device-metadata-root", Usage: "host directory, on a tmpfs, that holds the device metadata files in <this>/<driver-name> (the data directory links to it); must be mounted at the same path; empty keeps them in the data directory, on its disk", Value: DefaultDeviceMetadataRoot, EnvVars: []string{"DEVICE_METADATA_ROOT"}, Destination: &c.DeviceMetadataRoot, TakesFile: true},
		&cli.BoolFlag{Name: "network-attachment", Usage: "attach the networks that claims ask for (RoCE and IPoIB in pods) through the container runtime's NRI; claims that ask for it fail while NRI is not reachable", Value: true, EnvVars: []string{"NETWORK_ATTACHMENT"}, Destination: &c.NetworkAttachment},
		&cli.StringFlag{Name: "nri-socket", Usage: "the container runtime's NRI socket; the plugin reconnects with backoff while it is missing", Value: podnet.DefaultNRISocket, EnvVars: []string{"NRI_SOCKET"}, Destination: &c.NRISocket, TakesFile: true},
		&cli.StringFlag{Name: "rdma-kernel", Usage: "sysfs (the node's RDMA subsystem) or emulated (a mock node: the plugin writes the GID entries of pod addresses into the mock sysfs tree)", Value: RDMAKernelSysfs, EnvVars: []string{"RDMA_KERNEL"}, Destination: &c.RDMAKernel},
		&cli.GenericFlag{Name: "node-ips", Usage: "comma-separated addresses of the node (the kubelet's node IPs; the chart passes status.hostIPs, every family of a dual-stack node): network mode move never takes the netdev that carries one, and ipam: node never hands one out", EnvVars: []string{"NODE_IPS"}, Value: commaList{&c.NodeIPs}},
	)
	return flags
}

// KeysAndValues lists the whole configuration for the startup log line: every flag
// under its name in camel case (--kube-api-qps: kubeAPIQPS) with its value in c, then
// what is derived from them.
func (c Config) KeysAndValues() []any {
	kv := []any{"version", version.String()}
	kv = append(kv, cliflags.KeysAndValues(Flags(&c))...)
	return append(kv,
		"dataDir", c.DataDir(), "rollingUpdate", c.PodUID != "", "deviceMetadataDir", c.MetadataDir(),
		"useNetlink", c.UseNetlink(), "prepareHoldFile", c.PrepareHoldFile)
}

// commaList is a flag value of comma-separated strings, blanks dropped.
type commaList struct{ p *[]string }

// Set replaces the list.
func (l commaList) Set(s string) error {
	*l.p = nil
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			*l.p = append(*l.p, item)
		}
	}
	return nil
}

// String is the list as it is given.
func (l commaList) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

// Get is the list itself, for the startup log (flag.Getter).
func (l commaList) Get() any { return *l.p }

// parseNodeIPs parses the addresses of --node-ips. The chart passes the downward API's
// status.hostIPs (every node IP, comma-separated, the primary first); a value from
// status.hostIP (one address) or written by hand parses the same, since commaList has
// already split it and dropped blanks.
func parseNodeIPs(list []string) ([]netip.Addr, error) {
	var ips []netip.Addr
	for _, s := range list {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("--node-ips: %q is not an IP address", s)
		}
		ips = append(ips, ip)
	}
	return ips, nil
}

package plugin

import (
	"context"
	"fmt"
	"os"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// RDMA kernels of --rdma-kernel.
const (
	// RDMAKernelSysfs is the node's real RDMA subsystem: GID tables read from sysfs,
	// RDMA devices moved with RDMA netlink.
	RDMAKernelSysfs = "sysfs"
	// RDMAKernelEmulated is a stand-in for mock nodes without an RDMA subsystem: the
	// plugin does to the mock sysfs tree what the kernel would (a GID entry for each pod
	// address; RDMA device moves are recorded only).
	RDMAKernelEmulated = "emulated"
)

// networkOptions builds the network attachment of the plugin, or says why there is none.
func networkOptions(ctx context.Context, cfg Config, nodeCfg *nodeconfig.Config) (*NetworkOptions, string, error) {
	if !cfg.NetworkAttachment {
		return nil, "the plugin runs with --network-attachment=false", nil
	}
	var kernel netattach.RDMAKernel
	switch cfg.RDMAKernel {
	case RDMAKernelSysfs:
		kernel = netattach.NewSysfsKernel(cfg.SysfsRoot)
	case RDMAKernelEmulated:
		kernel = netattach.NewEmulatedKernel(cfg.SysfsRoot)
	default:
		return nil, "", fmt.Errorf("--rdma-kernel must be %s or %s, got %q", RDMAKernelSysfs, RDMAKernelEmulated, cfg.RDMAKernel)
	}
	ips, err := parseNodeIPs(cfg.NodeIPs)
	if err != nil {
		return nil, "", err
	}
	if _, err := os.Stat(cfg.NRISocket); err != nil {
		// Not fatal: the runtime may start NRI later, and RunNRI keeps trying.
		klog.FromContext(ctx).Info("NRI socket not found: claims that ask for network attachment fail until the runtime serves it",
			"socket", cfg.NRISocket, "err", err)
	}
	return &NetworkOptions{
		// The guard keeps the node's addresses out of the pools and refuses attachments
		// that would overflow a port's GID table (podnet.NodeGuard).
		Attacher: podnet.NewNodeGuard(netattach.NewAttacher(netattach.Options{Kernel: kernel, NodeIPs: ips, IPoIBStandIn: cfg.RDMAKernel == RDMAKernelEmulated}),
			cfg.SysfsRoot, ips),
		Pools:   nodeCfg,
		Socket:  cfg.NRISocket,
		MarkDir: attachmark.Dir(cfg.DataDir()),
	}, "", nil
}

// nriPluginName is the name the plugin registers with NRI: the driver's, and the pod's
// UID where there is one, so that the two instances of a rolling update are two plugins
// (both may see an event; the claims' locks and the checkpoint make the second a no-op).
func nriPluginName(cfg Config) string {
	name := cfg.DriverName
	if cfg.PodUID != "" {
		name += "-" + cfg.PodUID
	}
	return name
}

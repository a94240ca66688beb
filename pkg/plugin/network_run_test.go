package plugin

import (
	"fmt"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// TestNetworkOptionsGuardsTheAttacher: the plugin's attacher is wrapped in the node guard
// with every node IP of a dual-stack node.
func TestNetworkOptionsGuardsTheAttacher(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := Config{NetworkAttachment: true, RDMAKernel: RDMAKernelSysfs, SysfsRoot: "/sys", NRISocket: filepath.Join(t.TempDir(), "nri.sock"),
		NodeIPs: []string{"10.0.0.1", "fd00::1"}}
	opts, reason, err := networkOptions(ctx, cfg, &nodeconfig.Config{})
	if err != nil || reason != "" {
		t.Fatalf("networkOptions: %v %q", err, reason)
	}
	g, ok := opts.Attacher.(*podnet.NodeGuard)
	if !ok {
		t.Fatalf("attacher %T, want the node guard", opts.Attacher)
	}
	if _, ok := g.Attacher.(*netattach.Attacher); !ok || g.SysfsRoot != "/sys" || fmt.Sprint(g.NodeIPs) != "[10.0.0.1 fd00::1]" {
		t.Errorf("guard of %T, root %s, node IPs %v", g.Attacher, g.SysfsRoot, g.NodeIPs)
	}
}

package plugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// TestThroughKubeletPluginHelper drives the plugin the way the kubelet does: over the
// helper's DRA gRPC socket, with the helper fetching the claim from the API server.
func TestThroughKubeletPluginHelper(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	// Socket paths are limited to 108 bytes; the test's temporary directory may be long.
	sockDir := filepath.Join(testRoot, "s")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	helper, err := kubeletplugin.Start(ctx, d,
		kubeletplugin.DriverName(testDriver),
		kubeletplugin.NodeName(testNode),
		kubeletplugin.KubeClient(h.kube),
		kubeletplugin.RegistrarDirectoryPath(mkdir(t, sockDir+"r")),
		kubeletplugin.PluginDataDirectoryPath(mkdir(t, sockDir+"d")),
		kubeletplugin.HealthService(false),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer helper.Stop()

	conn, err := grpc.NewClient("unix://"+filepath.Join(sockDir+"d", "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	client := drapbv1.NewDRAPluginClient(conn)
	claim := h.claim("c", exclusive(2))
	ref := &drapbv1.Claim{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}
	resp, err := client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: []*drapbv1.Claim{ref}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Claims[string(claim.UID)]
	if got == nil || got.Error != "" || len(got.Devices) != 2 || got.Devices[1].DeviceName != "mlx5-1-p1" || len(got.Devices[1].CdiDeviceIds) == 0 {
		t.Fatalf("prepare response: %+v", got)
	}
	uresp, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: []*drapbv1.Claim{ref}})
	if err != nil {
		t.Fatal(err)
	}
	if e := uresp.Claims[string(claim.UID)]; e == nil || e.Error != "" {
		t.Fatalf("unprepare response: %+v", e)
	}
	assertClean(t, h)
}

func mkdir(t *testing.T, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

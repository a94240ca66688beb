package plugin

import (
	"context"
	"os"
	"testing"

	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
)

// TestThroughKubeletPluginHelper drives the plugin the way the kubelet does: over the
// helper's DRA gRPC socket, with the helper fetching the claim from the API server.
func TestThroughKubeletPluginHelper(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	conn := startHelper(t, ctx, d, h.kube, "s", false)
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

func mkdir(t testing.TB, dir string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

package mockgpu

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
)

func TestConfig(t *testing.T) {
	valid := Config{NodeName: "node-a", SysfsRoot: "/var/lib/rdma-dra-local/mock/sys", CDIRoot: "/var/run/cdi", KubeletRoot: "/var/lib/rdma-dra-local/kubelet"}
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr []string
	}{
		{name: "valid", change: func(*Config) {}},
		{name: "no node", change: func(c *Config) { c.NodeName = "" }, wantErr: []string{"--node-name is required"}},
		{name: "relative paths", change: func(c *Config) { c.SysfsRoot, c.KubeletRoot = "sys", "" }, wantErr: []string{
			`--sysfs-root must be an absolute path, got "sys"`,
			`--kubelet-root must be an absolute path, got ""`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid
			tt.change(&c)
			err := c.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() error = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Validate() error = %v, want it to contain %q", err, want)
				}
			}
		})
	}
	if got, want := valid.RegistrarDir(), "/var/lib/rdma-dra-local/kubelet/plugins_registry"; got != want {
		t.Errorf("RegistrarDir() = %s, want %s", got, want)
	}
	if got, want := valid.DataDir(), "/var/lib/rdma-dra-local/kubelet/plugins/gpu.mock.rdma.dra.io"; got != want {
		t.Errorf("DataDir() = %s, want %s", got, want)
	}
}

// TestRun drives the plugin as the kubelet does: the helper publishes the node's pool to
// the (fake) API server, and prepare and unprepare arrive over the DRA gRPC socket, with
// the helper fetching the claim.
func TestRun(t *testing.T) {
	const uid = "77777777-2222-4333-8444-555555555555"
	cfg := Config{NodeName: "node-a", SysfsRoot: writeNode(t, fixtureFunctions()), CDIRoot: t.TempDir(), KubeletRoot: t.TempDir()}
	if err := os.Mkdir(cfg.RegistrarDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	claim := allocatedClaim(uid, result{"gpu", DriverName, "node-a-gpu", "gpu-1"})
	kube := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: "node-a-uid"}}, claim)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, kube) }()

	var slices []resourceapi.ResourceSlice
	if !testwait.Poll(func() bool {
		list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		slices = list.Items
		return len(slices) == 1
	}) {
		t.Fatalf("the node's ResourceSlice was not published: %+v", slices)
	}
	s := slices[0].Spec
	var names []string
	for _, d := range s.Devices {
		names = append(names, d.Name)
	}
	if s.Driver != DriverName || s.Pool.Name != "node-a-gpu" || ptr.Deref(s.NodeName, "") != "node-a" || !cmp.Equal(names, []string{"gpu-0", "gpu-1", "gpu-2"}) {
		t.Errorf("published slice: driver %s, pool %s, node %v, devices %v", s.Driver, s.Pool.Name, ptr.Deref(s.NodeName, ""), names)
	}

	conn, err := grpc.NewClient("unix://"+filepath.Join(cfg.DataDir(), "dra.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := drapbv1.NewDRAPluginClient(conn)
	ref := []*drapbv1.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: uid}}
	var prepared *drapbv1.NodePrepareResourcesResponse
	// The helper serves the socket before Start returns; the dial may still race it.
	if !testwait.Poll(func() bool {
		prepared, err = client.NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{Claims: ref})
		return err == nil
	}) {
		t.Fatalf("NodePrepareResources: %v", err)
	}
	got := prepared.Claims[uid]
	if got == nil || got.Error != "" || len(got.Devices) != 1 || !cmp.Equal(got.Devices[0].CdiDeviceIds, []string{"gpu.mock.rdma.dra.io/gpu=" + uid + "-gpu-1"}) {
		t.Fatalf("prepare response: %+v", got)
	}
	if specs := specFiles(t, cfg.CDIRoot); len(specs) != 1 {
		t.Errorf("spec files after prepare: %v, want one", specs)
	}
	unprepared, err := client.NodeUnprepareResources(ctx, &drapbv1.NodeUnprepareResourcesRequest{Claims: ref})
	if err != nil || unprepared.Claims[uid] == nil || unprepared.Claims[uid].Error != "" {
		t.Fatalf("NodeUnprepareResources: %v, %+v", err, unprepared)
	}
	if specs := specFiles(t, cfg.CDIRoot); len(specs) != 0 {
		t.Errorf("spec files after unprepare: %v", specs)
	}

	cancel()
	if err := testwait.Receive(t, "Run to return", done); err != nil {
		t.Errorf("Run() after cancel = %v, want nil", err)
	}
}

package plugin

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/nri/pkg/api"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// TestUnreadableCheckpoint: while the checkpoint cannot be read (here: written by a newer
// plugin, as after a rollback), the NRI side must not fail the sandboxes and containers
// of pods that have nothing of this driver's, and must fail those that do.
func TestUnreadableCheckpoint(t *testing.T) {
	const netns = "/var/run/netns/cni-a"
	ours := func(h *harness) *api.Container {
		return &api.Container{Name: "c", CDIDevices: []*api.CDIDevice{{Name: cdi.Kind(testDriver) + "=" + string(uidFor("a")) + "-mlx5-8-p1"}}}
	}
	theirs := func(*harness) *api.Container {
		return &api.Container{Name: "c", CDIDevices: []*api.CDIDevice{{Name: "nvidia.com/gpu=0"}}}
	}
	unknown := func(*harness) *api.Container { return &api.Container{Name: "c"} }
	tests := []struct {
		name string
		// prepared prepares claim a, reserved for pod-a; otherwise no claim of this
		// driver is prepared on the node.
		prepared bool
		// apiDown fails every list of claims.
		apiDown bool
		pod     string
		// ctr is the container of a CreateContainer; nil tests RunPodSandbox.
		ctr      func(*harness) *api.Container
		wantFail bool
		// wantLists is how many lists of claims the decision takes.
		wantLists int32
	}{
		{name: "sandbox of a pod without claims", prepared: true, pod: "pod-x", wantLists: 1},
		{name: "sandbox of a pod with a claim of this driver", prepared: true, pod: "pod-a", wantFail: true, wantLists: 1},
		{name: "sandbox while the API cannot tell", prepared: true, apiDown: true, pod: "pod-x", wantFail: true, wantLists: 1},
		{name: "sandbox while no claim is prepared on the node", apiDown: true, pod: "pod-x"},
		{name: "container without CDI devices of this driver", prepared: true, pod: "pod-a", ctr: theirs},
		{name: "container with a CDI device of this driver", prepared: true, pod: "pod-a", ctr: ours, wantFail: true},
		{name: "container the runtime shows no CDI devices of, pod without claims", prepared: true, pod: "pod-x", ctr: unknown, wantLists: 1},
		{name: "container the runtime shows no CDI devices of, pod with a claim", prepared: true, pod: "pod-a", ctr: unknown, wantFail: true, wantLists: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.networkDriver(newFakeAttacher())
			if tc.prepared {
				a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
					opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-a")
				if res := prepareOne(t, d, a); res.Err != nil {
					t.Fatal(res.Err)
				}
			}
			// The fake clientset's reactors may not change while the status writer calls.
			if err := d.status.WaitIdle(h.ctx); err != nil {
				t.Fatal(err)
			}
			var lists atomic.Int32
			h.kube.PrependReactor("list", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
				lists.Add(1)
				if tc.apiDown {
					return true, nil, errors.New("the API server is down")
				}
				return false, nil, nil
			})
			// A rollback: the checkpoint was written by a newer plugin.
			if err := os.WriteFile(filepath.Join(h.dataDir, checkpoint.FileName), []byte(`{"version":7,"bootID":"boot-1","claims":{}}`), 0o600); err != nil {
				t.Fatal(err)
			}
			n := podnet.NewNRIPlugin(d.net, klog.FromContext(h.ctx))
			var err error
			if tc.ctr == nil {
				err = n.RunPodSandbox(h.ctx, sandbox(tc.pod, netns))
			} else {
				_, _, err = n.CreateContainer(h.ctx, sandbox(tc.pod, netns), tc.ctr(h))
			}
			switch {
			case tc.wantFail && (err == nil || !strings.Contains(err.Error(), "newer plugin")):
				t.Errorf("error %v, want the checkpoint's", err)
			case !tc.wantFail && err != nil:
				t.Errorf("error %v, want none: the pod has nothing of this driver", err)
			}
			if got := lists.Load(); got != tc.wantLists {
				t.Errorf("%d lists of claims, want %d", got, tc.wantLists)
			}
		})
	}
}

package plugin

import (
	"testing"

	"github.com/containerd/nri/pkg/api"
	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// sandbox is the runtime's view of a sandbox of pod uid whose network namespace is netns
// (empty: the host's).
func sandbox(uid, netns string) *api.PodSandbox {
	pod := &api.PodSandbox{Id: "sandbox-" + netns, Uid: uid, Namespace: "ns", Name: uid}
	if netns != "" {
		pod.Linux = &api.LinuxPodSandbox{Namespaces: []*api.LinuxNamespace{{Type: "network", Path: netns}}}
	}
	return pod
}

// TestSandboxesOfOnePod replays the runtime's events of a pod whose sandbox is created
// again (its old sandbox died): the kubelet stops the old sandbox, runs the new one and
// removes the old one afterwards (its garbage collector keeps the newest sandbox of a
// pod and removes the others, stopping them once more first).
func TestSandboxesOfOnePod(t *testing.T) {
	const (
		oldNS = "/var/run/netns/cni-old"
		newNS = "/var/run/netns/cni-new"
	)
	type event struct {
		name  string // run, stop, remove
		netns string
	}
	tests := []struct {
		name   string
		events []event
		want   []string
	}{
		{
			name:   "the old sandbox removed after the new one runs",
			events: []event{{"run", oldNS}, {"stop", oldNS}, {"run", newNS}, {"stop", oldNS}, {"remove", oldNS}},
			want:   []string{"attach pod-a rdma0", "detach pod-a rdma0", "attach pod-a rdma0"},
		},
		{
			name:   "the old sandbox's stop missed",
			events: []event{{"run", oldNS}, {"run", newNS}},
			want:   []string{"attach pod-a rdma0", "detach pod-a rdma0", "attach pod-a rdma0"},
		},
		{
			name:   "the new sandbox's stop and removal",
			events: []event{{"run", oldNS}, {"run", newNS}, {"stop", newNS}, {"remove", newNS}},
			want:   []string{"attach pod-a rdma0", "detach pod-a rdma0", "attach pod-a rdma0", "detach pod-a rdma0"},
		},
		{
			name:   "the new sandbox's run missed, its container created",
			events: []event{{"run", oldNS}, {"create", newNS}},
			want:   []string{"attach pod-a rdma0", "detach pod-a rdma0", "attach pod-a rdma0"},
		},
		{
			name:   "a repeated event of the running sandbox",
			events: []event{{"run", newNS}, {"run", newNS}},
			want:   []string{"attach pod-a rdma0"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			f := newFakeAttacher()
			d := h.networkDriver(f)
			a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
				opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-a")
			if res := prepareOne(t, d, a); res.Err != nil {
				t.Fatal(res.Err)
			}
			n := podnet.NewNRIPlugin(d.net, klog.FromContext(h.ctx))
			for _, e := range tc.events {
				var err error
				switch e.name {
				case "run":
					err = n.RunPodSandbox(h.ctx, sandbox("pod-a", e.netns))
				case "stop":
					err = n.StopPodSandbox(h.ctx, sandbox("pod-a", e.netns))
				case "remove":
					err = n.RemovePodSandbox(h.ctx, sandbox("pod-a", e.netns))
				case "create":
					_, _, err = n.CreateContainer(h.ctx, sandbox("pod-a", e.netns), &api.Container{Name: "c"})
				}
				if err != nil {
					t.Fatalf("%s %s: %v", e.name, e.netns, err)
				}
			}
			if diff := cmp.Diff(tc.want, f.callList()); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
			// What is attached is in the sandbox of the last run.
			for key, st := range f.attached {
				if st.Target.NetnsPath != newNS {
					t.Errorf("%s is attached into %s, want the running sandbox's %s", key, st.Target.NetnsPath, newNS)
				}
			}
		})
	}
}

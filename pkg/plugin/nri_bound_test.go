package plugin

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// gatedAttacher holds attaches and detaches, once held is set, until the gate opens.
type gatedAttacher struct {
	*fakeAttacher
	gate chan struct{}
	mu   sync.Mutex
	held bool
}

func (g *gatedAttacher) wait() {
	g.mu.Lock()
	held := g.held
	g.mu.Unlock()
	if held {
		<-g.gate
	}
}

func (g *gatedAttacher) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = true
}

func (g *gatedAttacher) Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error) {
	g.wait()
	return g.fakeAttacher.Attach(ctx, spec, target, save)
}

func (g *gatedAttacher) Detach(ctx context.Context, st netattach.State, save netattach.Journal) error {
	g.wait()
	return g.fakeAttacher.Detach(ctx, st, save)
}

// TestNRIRequestsAnswerInTime holds the node's side of an attach or detach past the
// runtime's request timeout: the plugin must answer each request before the runtime
// gives up on it (which would close the plugin's connection), with an error that is not
// a timeout, and finish the work in the background, where the runtime's retry finds it.
// In a synctest bubble, whose clock only moves when everything waits.
func TestNRIRequestsAnswerInTime(t *testing.T) {
	const netns = "/var/run/netns/cni-a"
	tests := []struct {
		name string
		// attached attaches the pod before the request is made.
		attached bool
		call     func(n *podnet.NRIPlugin, ctx context.Context) error
		// wantErr is whether the held request fails (the runtime retries it).
		wantErr bool
		// wantAttached is whether the pod is attached once the work is done.
		wantAttached bool
	}{
		{
			name: "RunPodSandbox",
			call: func(n *podnet.NRIPlugin, ctx context.Context) error {
				return n.RunPodSandbox(ctx, sandbox("pod-a", netns))
			},
			wantErr: true, wantAttached: true,
		},
		{
			name: "CreateContainer",
			call: func(n *podnet.NRIPlugin, ctx context.Context) error {
				_, _, err := n.CreateContainer(ctx, sandbox("pod-a", netns), &api.Container{Name: "c"})
				return err
			},
			wantErr: true, wantAttached: true,
		},
		{
			name: "StopPodSandbox", attached: true,
			call: func(n *podnet.NRIPlugin, ctx context.Context) error {
				return n.StopPodSandbox(ctx, sandbox("pod-a", netns))
			},
			wantErr: true,
		},
		{
			name: "RemovePodSandbox", attached: true,
			call: func(n *podnet.NRIPlugin, ctx context.Context) error {
				return n.RemovePodSandbox(ctx, sandbox("pod-a", netns))
			},
			wantErr: true,
		},
		{
			name: "Synchronize",
			call: func(n *podnet.NRIPlugin, ctx context.Context) error {
				_, err := n.Synchronize(ctx, []*api.PodSandbox{sandbox("pod-a", netns)}, nil)
				return err
			},
			wantAttached: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, "dgx-h100")
				g := &gatedAttacher{fakeAttacher: newFakeAttacher(), gate: make(chan struct{})}
				d := h.networkDriverNamed(g, testDriver)
				a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
					opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-a")
				if res := prepareOne(t, d, a); res.Err != nil {
					t.Fatal(res.Err)
				}
				n := podnet.NewNRIPlugin(d.net, klog.FromContext(h.ctx))
				if tc.attached {
					if err := n.RunPodSandbox(h.ctx, sandbox("pod-a", netns)); err != nil {
						t.Fatal(err)
					}
				}
				g.hold()

				// The runtime's side of the request: its default timeout.
				ctx, cancel := context.WithTimeout(h.ctx, stub.DefaultRequestTimeout)
				defer cancel()
				answered := make(chan error, 1)
				go func() { answered <- tc.call(n, ctx) }()
				time.Sleep(stub.DefaultRequestTimeout - time.Millisecond)
				synctest.Wait()
				select {
				case err := <-answered:
					if tc.wantErr != (err != nil) {
						t.Errorf("answer %v, want an error: %v", err, tc.wantErr)
					}
					if errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("answer %v is a timeout, which makes the runtime close the plugin", err)
					}
				default:
					t.Errorf("no answer before the runtime's request timeout of %s", stub.DefaultRequestTimeout)
				}

				// The node's side finishes: the work is done without another request.
				close(g.gate)
				synctest.Wait()
				if got := attachedPhase(t, h, d); (got == netattach.PhaseAttached) != tc.wantAttached {
					t.Errorf("attachment %q after the work, want attached: %v", got, tc.wantAttached)
				}
				if tc.wantErr {
					// The runtime's retry finds the work done.
					if err := tc.call(n, h.ctx); err != nil {
						t.Errorf("retry: %v", err)
					}
				}
			})
		})
	}
}

// attachedPhase is the phase of pod-a's attachment to claim a; empty when there is none.
func attachedPhase(t *testing.T, h *harness, d *Driver) netattach.Phase {
	t.Helper()
	var phase netattach.Phase
	err := d.update(h.ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		n := networkOf(cp.Claims[string(uidFor("a"))])
		if n == nil {
			return false, nil
		}
		if a := n.Devices[0].Attachment("pod-a"); a != nil {
			phase = a.State.Phase
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return phase
}

package plugin

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// TestCleanupDropsPodsNoLongerReserved: a shared claim's network record lists the pods
// of every prepare; the cleanup drops those the claim is no longer reserved for, and
// keeps those that may still be attaching.
func TestCleanupDropsPodsNoLongerReserved(t *testing.T) {
	tests := []struct {
		name string
		// run changes the claim and the node after the claim was prepared for pod-1,
		// runs the cleanup (cleanup) as often as it needs, and returns the pods the
		// record must list at the end.
		run func(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim, cleanup func()) []string
	}{
		{
			name: "a pod no longer reserved goes, a new one stays",
			run: func(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim, cleanup func()) []string {
				claim = h.setReservedFor(claim, "pod-2")
				if res := prepareOne(t, d, claim); res.Err != nil {
					t.Fatal(res.Err)
				}
				if got := podsOf(t, h, d, claim); !cmp.Equal(got, []string{"pod-1", "pod-2"}) {
					t.Fatalf("pods after the second prepare %v, want both", got)
				}
				cleanup()
				return []string{"pod-2"}
			},
		},
		{
			name: "a pod no longer reserved stays while it is attached",
			run: func(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim, cleanup func()) []string {
				if err := d.net.AttachPod(h.ctx, "pod-1", "ns/pod-1", "/var/run/netns/cni-1"); err != nil {
					t.Fatal(err)
				}
				h.setReservedFor(claim)
				cleanup()
				if got := podsOf(t, h, d, claim); !cmp.Equal(got, []string{"pod-1"}) {
					t.Errorf("pods of a claim whose pod is still attached %v, want it kept", got)
				}
				if err := d.net.DetachPod(h.ctx, "pod-1"); err != nil {
					t.Fatal(err)
				}
				cleanup()
				return nil
			},
		},
		{
			name: "a pod merged while the cleanup reads the claim stays",
			run: func(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim, cleanup func()) []string {
				stale := claim.DeepCopy()
				merged := false
				// The fake clientset's reactors may not change while the status writer
				// calls.
				if err := d.status.WaitIdle(h.ctx); err != nil {
					t.Fatal(err)
				}
				h.kube.PrependReactor("get", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					if merged {
						return false, nil, nil
					}
					merged = true
					// The kubelet prepares the claim for pod-3 between the API's answer
					// (which predates pod-3) and the cleanup's change of the record.
					next := stale.DeepCopy()
					next.Status.ReservedFor = append(next.Status.ReservedFor, consumer("pod-3"))
					if res := prepareOne(t, d, next); res.Err != nil {
						t.Error(res.Err)
					}
					return true, stale, nil
				})
				cleanup()
				return []string{"pod-1", "pod-3"}
			},
		},
		{
			name: "a claim locked by a request is left for the next run",
			run: func(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim, cleanup func()) []string {
				h.setReservedFor(claim, "pod-2")
				held, err := d.claims.lock(h.ctx, []string{string(claim.UID)})
				if err != nil {
					t.Fatal(err)
				}
				cleanup()
				held.release(nil)
				if got := podsOf(t, h, d, claim); !cmp.Equal(got, []string{"pod-1"}) {
					t.Errorf("pods of a locked claim %v, want them as they were", got)
				}
				cleanup()
				return nil
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			d := h.networkDriver(newFakeAttacher())
			claim := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
				opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-1")
			if res := prepareOne(t, d, claim); res.Err != nil {
				t.Fatal(res.Err)
			}
			cleanup := func() {
				t.Helper()
				if err := d.Cleanup(h.ctx); err != nil {
					t.Fatal(err)
				}
			}
			want := tc.run(t, h, d, claim, cleanup)
			if diff := cmp.Diff(want, podsOf(t, h, d, claim)); diff != "" {
				t.Errorf("pods of the claim's network record (-want +got):\n%s", diff)
			}
		})
	}
}

func consumer(pod string) resourceapi.ResourceClaimConsumerReference {
	return resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + pod, UID: types.UID(pod)}
}

// setReservedFor makes the claim, as it is in the API now, reserved for exactly pods.
func (h *harness) setReservedFor(claim *resourceapi.ResourceClaim, pods ...string) *resourceapi.ResourceClaim {
	h.t.Helper()
	current, err := h.kube.ResourceV1().ResourceClaims(claim.Namespace).Get(context.Background(), claim.Name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	current.Status.ReservedFor = nil
	for _, p := range pods {
		current.Status.ReservedFor = append(current.Status.ReservedFor, consumer(p))
	}
	updated, err := h.kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(h.ctx, current, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return updated
}

// podsOf returns the pods of the claim's network record.
func podsOf(t *testing.T, h *harness, d *Driver, claim *resourceapi.ResourceClaim) []string {
	t.Helper()
	var pods []string
	err := d.update(h.ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		if n := networkOf(cp.Claims[string(claim.UID)]); n != nil {
			pods = append([]string(nil), n.Pods...)
		}
		return false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pods
}

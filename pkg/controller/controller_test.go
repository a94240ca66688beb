package controller

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// TestPoolEventsEnqueue: an event of a pool enqueues every pool (an extended resource
// name conflict may change with it) and the pool itself, also when it was deleted and
// is no longer in the lister: that sync deletes its DeviceClass at once instead of
// leaving it to the garbage collector.
func TestPoolEventsEnqueue(t *testing.T) {
	tests := []struct {
		name  string
		event func(h *harness, pools cache.ResourceEventHandler)
		want  []string
	}{
		{"added", func(h *harness, pools cache.ResourceEventHandler) { pools.OnAdd(h.pool("new"), false) },
			[]string{"kept", "new"}},
		{"changed", func(h *harness, pools cache.ResourceEventHandler) { pools.OnUpdate(h.pool("new"), h.pool("new")) },
			[]string{"kept", "new"}},
		{"deleted", func(h *harness, pools cache.ResourceEventHandler) {
			gone := h.pool("new")
			if err := h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "new", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.refresh()
			pools.OnDelete(gone)
		}, []string{"kept", "new"}},
		{"deleted, last state unknown", func(h *harness, pools cache.ResourceEventHandler) {
			gone := h.pool("new")
			if err := h.rdma.RdmaV1alpha1().RdmaPools().Delete(h.ctx, "new", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			h.refresh()
			pools.OnDelete(cache.DeletedFinalStateUnknown{Key: "new", Obj: gone})
		}, []string{"kept", "new"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			for _, name := range []string{"kept", "new"} {
				h.putPool(newPool(name, v1alpha1.PoolModeShared, t0))
			}
			h.refresh()
			q := &recordingQueue{added: map[string]time.Duration{}}
			h.c.queue = q
			tt.event(h, h.c.handlers(h.ctx)[0].handler)
			want := map[string]time.Duration{}
			for _, p := range tt.want {
				want[p] = 0
			}
			if diff := cmp.Diff(want, q.added); diff != "" {
				t.Errorf("enqueued pools (-want +got):\n%s", diff)
			}
		})
	}
}

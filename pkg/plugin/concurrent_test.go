package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// prepareAtOnce prepares each claim in a call of its own, all calls started together, the
// way the helper runs concurrent NodePrepareResources calls; drivers[i%len] serves call i.
func prepareAtOnce(t *testing.T, drivers []*Driver, claims []*resourceapi.ResourceClaim) []kubeletplugin.PrepareResult {
	t.Helper()
	results := make([]kubeletplugin.PrepareResult, len(claims))
	errs := make([]error, len(claims))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := drivers[i%len(drivers)].PrepareResourceClaims(context.Background(), []*resourceapi.ResourceClaim{c})
			errs[i] = err
			results[i] = res[c.UID]
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("prepare %s: %v", claims[i].Name, err)
		}
	}
	return results
}

// unprepareAtOnce unprepares the claims concurrently, one call each.
func unprepareAtOnce(t *testing.T, d *Driver, claims []*resourceapi.ResourceClaim) {
	t.Helper()
	errs := make([]error, len(claims))
	var wg sync.WaitGroup
	for i, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := d.UnprepareResourceClaims(context.Background(), []kubeletplugin.NamespacedObject{{
				UID: c.UID, NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name},
			}})
			if err == nil {
				err = res[c.UID]
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("unprepare %s: %v", claims[i].Name, err)
		}
	}
}

// TestConcurrentOverlapOneWins races two claims for devices that cannot both be
// prepared, many times over, within one plugin process and across two (as during a
// rolling update): exactly one must win each time, and the loser must leave nothing.
func TestConcurrentOverlapOneWins(t *testing.T) {
	share := "11111111-1111-4111-8111-111111111111"
	tests := []struct {
		name      string
		a, b      []alloc
		instances int
	}{
		{name: "one exclusive device", a: exclusive(1), b: exclusive(1), instances: 1},
		{name: "exclusive against a share of its port", a: exclusive(1), b: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: share}}, instances: 1},
		{name: "the same share", a: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: share}}, b: []alloc{{request: "r", device: "mlx5-0-p1-shared", shareID: share}}, instances: 1},
		{name: "one exclusive device, two instances", a: exclusive(1), b: exclusive(1), instances: 2},
		{name: "eight exclusive devices, two instances", a: exclusive(8), b: exclusive(8), instances: 2},
	}
	const rounds = 15
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, "dgx-h100")
			var drivers []*Driver
			for range tc.instances {
				drivers = append(drivers, h.driver())
			}
			for round := range rounds {
				a := h.claim(fmt.Sprintf("a-%d", round), tc.a)
				b := h.claim(fmt.Sprintf("b-%d", round), tc.b)
				res := prepareAtOnce(t, drivers, []*resourceapi.ResourceClaim{a, b})
				won := 0
				for i, r := range res {
					if r.Err == nil {
						won++
					} else if !strings.Contains(r.Err.Error(), "conflicts with device") {
						t.Fatalf("round %d, claim %d: unexpected error %v", round, i, r.Err)
					}
				}
				if won != 1 {
					t.Fatalf("round %d: %d claims prepared, want exactly 1 (%v, %v)", round, won, res[0].Err, res[1].Err)
				}
				if got := h.checkpointClaims(); len(got) != 1 {
					t.Fatalf("round %d: checkpoint %v, want the winner only", round, got)
				}
				if got := files(t, h.cdiDir); len(got) != 1 {
					t.Fatalf("round %d: CDI specs %v, want the winner's only", round, got)
				}
				// The kubelet unprepares both when the pods go.
				unprepareAtOnce(t, drivers[round%len(drivers)], []*resourceapi.ResourceClaim{a, b})
				assertClean(t, h)
			}
		})
	}
}

// TestConcurrentPrepareManyClaims prepares claims that do not conflict all at once:
// every one must be prepared and recorded, and unpreparing them all at once must leave
// nothing behind but lock files, which the cleanup removes.
func TestConcurrentPrepareManyClaims(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	var claims []*resourceapi.ResourceClaim
	for i := range 16 {
		claims = append(claims, h.claim(fmt.Sprintf("c-%d", i), []alloc{{
			request: "rdma", device: "mlx5-0-p1-shared", shareID: fmt.Sprintf("%08d-1111-4111-8111-111111111111", i),
		}}))
	}
	claims = append(claims, h.claim("x", []alloc{{request: "rdma", device: "mlx5-1-p1"}}))
	for i, r := range prepareAtOnce(t, []*Driver{d}, claims) {
		if r.Err != nil || len(r.Devices) != 1 {
			t.Errorf("claim %s: %+v", claims[i].Name, r)
		}
	}
	phases := h.checkpointClaims()
	if len(phases) != len(claims) {
		t.Errorf("%d entries, want %d", len(phases), len(claims))
	}
	for uid, phase := range phases {
		if phase != checkpoint.PhasePrepareCompleted {
			t.Errorf("claim %s is %s", uid, phase)
		}
	}
	if got := files(t, h.cdiDir); len(got) != len(claims) {
		t.Errorf("%d CDI specs, want %d", len(got), len(claims))
	}
	unprepareAtOnce(t, d, claims)
	assertClean(t, h)
	if err := d.Cleanup(h.ctx); err != nil {
		t.Fatal(err)
	}
	if got := files(t, d.claims.dir); len(got) != 0 {
		t.Errorf("claim lock files left after the cleanup: %v", got)
	}
}

// TestConcurrentPrepareSameClaim: two pods sharing a claim start at once, so the kubelet
// prepares one claim in several calls at the same time. They must all get the answer of
// one preparation.
func TestConcurrentPrepareSameClaim(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	c := h.claim("shared-by-pods", exclusive(4))
	want := prepareOne(t, newHarness(t, "dgx-h100").driver(), c)
	same := []*resourceapi.ResourceClaim{c, c, c, c, c, c}
	for i, got := range prepareAtOnce(t, []*Driver{d, h.driver()}, same) {
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("call %d (-want +got):\n%s", i, diff)
		}
	}
	if got := files(t, h.cdiDir); len(got) != 1 {
		t.Errorf("CDI specs %v, want one", got)
	}
	unprepareOne(t, d, c)
	assertClean(t, h)
}

package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Regression tests of issue 11 (items 5 to 8): each failed before its fix.

// TestStaleCheckpointWithBadKeyIsQuarantined: a checkpoint of an earlier boot with an
// entry whose key is not a UUID used to fail boot recovery on every start (its CDI spec
// cannot be named). It is moved aside instead, the plugin starts, and the cleanup
// removes the spec the valid stale entry left behind.
func TestStaleCheckpointWithBadKeyIsQuarantined(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	valid := string(uidFor("stale"))
	cp := checkpoint.New("boot-0")
	for _, uid := range []string{valid, "not-a-uuid"} {
		cp.Claims[uid] = &checkpoint.Claim{UID: uid, Namespace: "ns", Name: "c-" + uid, Phase: checkpoint.PhasePrepareCompleted,
			Devices: []checkpoint.Device{{Request: "r", Pool: testPool, Device: "mlx5-0-p1", PortKey: "mlx5-0-p1", Exclusive: true, IBDev: "mlx5_0", Port: 1}}}
	}
	data, err := checkpoint.Encode(cp)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(filepath.Join(h.dataDir, checkpoint.FileName), data, 0o600))
	must(t, os.WriteFile(filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, valid)), []byte("{}"), 0o644))

	for start := range 2 {
		d, err := h.newDriver()
		if err != nil {
			t.Fatalf("start %d: %v", start, err)
		}
		if start == 0 {
			must(t, d.Cleanup(h.ctx))
		}
	}
	var aside []string
	for _, f := range files(t, h.dataDir) {
		if strings.HasPrefix(f, checkpoint.FileName+".corrupt-") {
			aside = append(aside, f)
		}
	}
	if len(aside) != 1 {
		t.Errorf("checkpoint with a bad key not moved aside once: %v", files(t, h.dataDir))
	}
	if got := h.checkpointClaims(); len(got) != 0 {
		t.Errorf("entries after quarantine: %v", got)
	}
	if got := files(t, h.cdiDir); len(got) != 0 {
		t.Errorf("spec of the stale claim not removed by the cleanup: %v", got)
	}
	// Prepare works: the devices are free.
	if res := prepareOne(t, h.driver(), h.claim("after", exclusive(1))); res.Err != nil {
		t.Error(res.Err)
	}
}

// TestPrepareRewritesMissingSpec: a completed entry whose CDI spec is gone (a crash
// between "spec removed" and "entry removed", or someone removed it) is not answered
// with CDI IDs that point to nothing: the spec is written again.
func TestPrepareRewritesMissingSpec(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	c := h.claim("c", exclusive(2))
	first := prepareOne(t, d, c)
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	spec := filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, string(c.UID)))
	must(t, os.Remove(spec))

	again := prepareOne(t, d, c)
	if again.Err != nil {
		t.Fatal(again.Err)
	}
	if _, err := os.Stat(spec); err != nil {
		t.Fatalf("prepare answered a completed entry without its CDI spec: %v", err)
	}
	if diff := cmp.Diff(first.Devices, again.Devices); diff != "" {
		t.Errorf("answer changed (-first +again):\n%s", diff)
	}
	if got := h.checkpointClaims()[string(c.UID)]; got != checkpoint.PhasePrepareCompleted {
		t.Errorf("entry phase %q after the rewrite", got)
	}
	// With the spec in place, a repeat is answered from the checkpoint alone.
	before, err := os.Stat(spec)
	must(t, err)
	prepareOne(t, d, c)
	after, err := os.Stat(spec)
	must(t, err)
	if !before.ModTime().Equal(after.ModTime()) {
		t.Error("a present spec was written again")
	}
}

// TestShareCountsEnforcedOnNode: the plugin refuses a claim whose shares of a shared
// device, with those already prepared for other claims, exceed the capacity the device
// is published with, naming the claim and the device.
func TestShareCountsEnforcedOnNode(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	shared := devicemodel.DeviceName("mlx5_0", 1) + "-shared"
	capacity := h.mustLookup(shared).MaxShares
	if capacity < 2 {
		t.Fatalf("%s publishes %d shares", shared, capacity)
	}
	shareClaim := func(name string, shares int64) *resourceapi.ResourceClaim {
		c := h.claim(name, []alloc{{request: "r", device: shared, shareID: string(uidFor("share-" + name))}})
		if shares > 0 {
			c.Status.Allocation.Devices.Results[0].ConsumedCapacity = map[resourceapi.QualifiedName]apiresource.Quantity{
				devicemodel.SharesCapacity: *apiresource.NewQuantity(shares, apiresource.DecimalSI),
			}
		}
		return c
	}

	t.Run("one share each, one claim more than shares", func(t *testing.T) {
		var claims []*resourceapi.ResourceClaim
		for i := range capacity {
			c := shareClaim("one-"+strconv.Itoa(i), 0) // no consumed capacity recorded: 1
			if res := prepareOne(t, d, c); res.Err != nil {
				t.Fatalf("share %d of %d: %v", i+1, capacity, res.Err)
			}
			claims = append(claims, c)
		}
		extra := shareClaim("one-too-many", 1)
		res := prepareOne(t, d, extra)
		if res.Err == nil {
			t.Fatalf("claim %d of a device with %d shares was prepared", capacity+1, capacity)
		}
		for _, want := range []string{"ns/one-too-many", shared, fmt.Sprintf("published with %d shares", capacity)} {
			if !strings.Contains(res.Err.Error(), want) {
				t.Errorf("error %q does not name %q", res.Err, want)
			}
		}
		// Once a share is given back, the claim fits.
		unprepareOne(t, d, claims[0])
		if res := prepareOne(t, d, extra); res.Err != nil {
			t.Errorf("after an unprepare: %v", res.Err)
		}
		for _, c := range claims[1:] {
			unprepareOne(t, d, c)
		}
		unprepareOne(t, d, extra)
	})

	t.Run("consumed capacity counts", func(t *testing.T) {
		big := int64(capacity)/2 + 1
		first := shareClaim("big-1", big)
		if res := prepareOne(t, d, first); res.Err != nil {
			t.Fatal(res.Err)
		}
		if res := prepareOne(t, d, shareClaim("big-2", big)); res.Err == nil {
			t.Errorf("two claims of %d shares each prepared on a device with %d", big, capacity)
		}
		if res := prepareOne(t, d, shareClaim("rest", int64(capacity)-big)); res.Err != nil {
			t.Errorf("the remaining %d shares: %v", int64(capacity)-big, res.Err)
		}
	})
}

// TestCleanupMemoryBoundedAt10000Claims: with specs that have no checkpoint entry and
// 10,000 claims in the cluster, the cleanup reads the claims in pages and keeps only the
// ones it looks for, so what it holds stays far below the plugin's memory limit in the
// chart (kubeletPlugin.resources.limits.memory, 128Mi), whatever the cluster's size. It
// also removes the spec of a claim that exists but is allocated on another node, which
// used to stay forever (and with it a list of every claim on every run).
func TestCleanupMemoryBoundedAt10000Claims(t *testing.T) {
	const (
		claims = 10000
		// Budget of the heap the cleanup may hold on top of what it held before: a few
		// pages of claims. Listing all 10,000 at once needs several times more.
		budget = 4 << 20
	)
	h := newHarness(t, "dgx-h100")
	d := h.driver()

	// The cluster's claims, served by a reactor that pages like the API server: all at
	// once without a limit, in pages with one.
	all := make([]resourceapi.ResourceClaim, claims)
	for i := range all {
		all[i] = bulkClaim(i)
	}
	adoptable, elsewhere := &all[1234], &all[77]
	adoptable.Status.Allocation.Devices.Results = []resourceapi.DeviceRequestAllocationResult{{Request: "r", Driver: testDriver, Pool: testPool, Device: "mlx5-0-p1"}}
	gone := string(uidFor("gone"))

	var pages, maxPage int
	var peak uint64
	goruntime.GC()
	var ms goruntime.MemStats
	goruntime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	h.kube.PrependReactor("list", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		opts := a.(k8stesting.ListActionImpl).ListOptions
		start := 0
		if opts.Continue != "" {
			start, _ = strconv.Atoi(opts.Continue)
		}
		end := len(all)
		if opts.Limit > 0 {
			end = min(start+int(opts.Limit), len(all))
		}
		list := &resourceapi.ResourceClaimList{}
		for i := start; i < end; i++ {
			list.Items = append(list.Items, *all[i].DeepCopy())
		}
		if end < len(all) {
			list.Continue = strconv.Itoa(end)
		}
		pages++
		maxPage = max(maxPage, len(list.Items))
		// What is live now: the page and whatever the cleanup kept of earlier pages.
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		if ms.HeapAlloc > base {
			peak = max(peak, ms.HeapAlloc-base)
		}
		goruntime.KeepAlive(list)
		return true, list, nil
	})
	for _, uid := range []string{string(adoptable.UID), string(elsewhere.UID), gone} {
		must(t, os.WriteFile(filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, uid)), []byte("{}"), 0o644))
	}

	must(t, d.Cleanup(h.ctx))
	t.Logf("%d claims: %d list calls, largest page %d claims, peak heap growth %.1f MiB (chart limit 128 MiB)",
		claims, pages, maxPage, float64(peak)/(1<<20))
	if maxPage > cleanupListPageSize {
		t.Errorf("a list call returned %d claims, want pages of at most %d", maxPage, cleanupListPageSize)
	}
	if peak > budget {
		t.Errorf("cleanup held %.1f MiB while listing %d claims, budget %.1f MiB", float64(peak)/(1<<20), claims, float64(budget)/(1<<20))
	}
	if want := []string{cdi.SpecFileName(testDriver, string(adoptable.UID))}; fmt.Sprint(files(t, h.cdiDir)) != fmt.Sprint(want) {
		t.Errorf("specs after cleanup %v, want only the adopted claim's %v", files(t, h.cdiDir), want)
	}
	if got := h.checkpointClaims()[string(adoptable.UID)]; got == "" {
		t.Errorf("spec of the claim allocated here not adopted: %v", h.checkpointClaims())
	}
}

// bulkClaim is claim i of a big cluster: allocated on another node, with the size of a
// real claim (two devices, a node selector, a pod it is reserved for).
func bulkClaim(i int) resourceapi.ResourceClaim {
	node := fmt.Sprintf("node-%d", i%1000+2)
	return resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("team-%d", i%50), Name: fmt.Sprintf("job-%d-rdma", i),
			UID: types.UID(fmt.Sprintf("%08x-1111-4000-8000-%012x", i, i)), ResourceVersion: strconv.Itoa(i + 1),
			CreationTimestamp: metav1.NewTime(time.Unix(int64(i), 0))},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-shared", Count: 2},
		}}}},
		Status: resourceapi.ResourceClaimStatus{
			Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "r", Driver: testDriver, Pool: node + devicemodel.PoolSuffix, Device: "mlx5-0-p1-shared"},
					{Request: "r", Driver: testDriver, Pool: node + devicemodel.PoolSuffix, Device: "mlx5-1-p1-shared"},
				}},
				NodeSelector: nodeSelectorFor(node),
			},
			ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: fmt.Sprintf("job-%d-0", i), UID: types.UID(fmt.Sprintf("%08x-2222-4000-8000-%012x", i, i))}},
		},
	}
}

// TestCleanupWorkPerRunIsBounded: one run looks up at most maxUnknownSpecsPerRun specs
// without entry; the rest go in later runs.
func TestCleanupWorkPerRunIsBounded(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	n := maxUnknownSpecsPerRun + 20
	for i := range n {
		must(t, os.WriteFile(filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, string(uidFor("orphan-"+strconv.Itoa(i))))), []byte("{}"), 0o644))
	}
	must(t, d.Cleanup(h.ctx))
	if got := len(files(t, h.cdiDir)); got != n-maxUnknownSpecsPerRun {
		t.Errorf("after one run %d specs left, want %d", got, n-maxUnknownSpecsPerRun)
	}
	must(t, d.Cleanup(h.ctx))
	if got := files(t, h.cdiDir); len(got) != 0 {
		t.Errorf("after two runs %d specs left", len(got))
	}
}

func nodeSelectorFor(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
}

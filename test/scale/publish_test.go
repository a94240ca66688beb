package scale

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/resourceslice"
)

// The harness keeps one catalog per profile and model and reads it for every node of
// the profile: that is only right if the devices do not depend on the node's name.
func TestCatalogIndependentOfNode(t *testing.T) {
	for _, k := range testKinds(t) {
		for _, m := range models {
			a, err := k.build("sim-00001", m)
			if err != nil {
				t.Fatal(err)
			}
			b, err := k.build("sim-04999", m)
			if err != nil {
				t.Fatal(err)
			}
			if len(a.Devices) == 0 {
				t.Errorf("%s, %s model: no devices", k.profile, m)
			}
			if !reflect.DeepEqual(a.Devices, b.Devices) {
				t.Errorf("%s, %s model: the devices differ between two nodes", k.profile, m)
			}
			if !reflect.DeepEqual(k.catalog[m], a.Devices) {
				t.Errorf("%s, %s model: the catalog is not the node's devices", k.profile, m)
			}
			if a.PoolName == b.PoolName {
				t.Errorf("%s, %s model: both nodes publish pool %q", k.profile, m, a.PoolName)
			}
			if _, ok := a.Resources.Pools[a.PoolName]; !ok || len(a.Resources.Pools) != 1 {
				t.Errorf("%s, %s model: pools %v, want only %q", k.profile, m, len(a.Resources.Pools), a.PoolName)
			}
		}
	}
}

// asPublished is what the API server holds for res: one ResourceSlice per slice.
func asPublished(res resourceslice.DriverResources) []resourceapi.ResourceSlice {
	var out []resourceapi.ResourceSlice
	for _, pool := range res.Pools {
		for _, s := range pool.Slices {
			out = append(out, resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: s.Devices, SharedCounters: s.SharedCounters}})
		}
	}
	return out
}

func TestFingerprint(t *testing.T) {
	k := testKinds(t)[0]
	res := map[Model]resourceslice.DriverResources{}
	for _, m := range models {
		r, err := k.build("n", m)
		if err != nil {
			t.Fatal(err)
		}
		res[m] = r.Resources
	}
	// Published as built: the same. Reversed slice order: still the same.
	for _, m := range models {
		want := resourcesFingerprint(res[m])
		pub := asPublished(res[m])
		if got := slicesFingerprint(pub); !equalStrings(got, want) {
			t.Errorf("%s model: published %v, want %v", m, got, want)
		}
		for i, j := 0, len(pub)-1; i < j; i, j = i+1, j-1 {
			pub[i], pub[j] = pub[j], pub[i]
		}
		if got := slicesFingerprint(pub); !equalStrings(got, want) {
			t.Errorf("%s model, slices in another order: %v, want %v", m, got, want)
		}
	}
	// Every model differs from every other, the default and the few-attributes model
	// included although they have the same devices by name.
	for i, a := range models {
		for _, b := range models[i+1:] {
			if equalStrings(resourcesFingerprint(res[a]), resourcesFingerprint(res[b])) {
				t.Errorf("the %s and the %s model have the same fingerprint", a, b)
			}
		}
	}
	// A slice missing, or a device gaining a taint, is a difference that is named.
	want := resourcesFingerprint(res[ModelDefault])
	pub := asPublished(res[ModelDefault])
	i := slices.IndexFunc(pub, func(s resourceapi.ResourceSlice) bool { return len(s.Spec.Devices) > 0 })
	if i < 0 {
		t.Fatal("no slice with devices")
	}
	missing := slices.Delete(slices.Clone(pub), i, i+1)
	if got := slicesFingerprint(missing); equalStrings(got, want) || !strings.HasPrefix(firstDifference(got, want), "missing ") {
		t.Errorf("a slice missing: %q", firstDifference(got, want))
	}
	pub[i].Spec.Devices = slices.Clone(pub[i].Spec.Devices)
	pub[i].Spec.Devices[0].Taints = []resourceapi.DeviceTaint{{Key: "k", Effect: resourceapi.DeviceTaintEffectNoSchedule}}
	if d := firstDifference(slicesFingerprint(pub), want); !strings.Contains(d, pub[i].Spec.Devices[0].Name) {
		t.Errorf("a taint added: difference %q does not name %s", d, pub[i].Spec.Devices[0].Name)
	}
	if d := firstDifference(want, want); d != "none" {
		t.Errorf("no difference: %q", d)
	}
}

func equalStrings(a, b []string) bool { return reflect.DeepEqual(a, b) }

func TestRequestCounterWaitQuiet(t *testing.T) {
	for _, tc := range []struct {
		name string
		// busy is how long requests keep coming, one every 100 ms, and watches how long
		// watches do.
		busy, watches time.Duration
		wantErr       bool
		// wantAfter is when waitQuiet returns at the earliest.
		wantAfter time.Duration
	}{
		{name: "quiet from the start", busy: 0, wantAfter: 5 * time.Second},
		{name: "quiet after 3s", busy: 3 * time.Second, wantAfter: 8 * time.Second},
		{name: "never quiet", busy: 5 * time.Minute, wantErr: true},
		{name: "only watches", watches: 5 * time.Minute, wantAfter: 5 * time.Second},
		{name: "watches beside requests", busy: 3 * time.Second, watches: 5 * time.Minute, wantAfter: 8 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				c := &requestCounter{}
				send := func(d time.Duration, url string) {
					req := httptest.NewRequest(http.MethodGet, url, nil)
					for end := time.Now().Add(d); time.Now().Before(end); {
						c.count(req)
						select {
						case <-ctx.Done():
							return
						case <-time.After(100 * time.Millisecond):
						}
					}
				}
				go send(tc.busy, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn")
				go send(tc.watches, "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.nodeName%3Dn&watch=true")
				start := time.Now()
				err := c.waitQuiet(ctx, 5*time.Second, time.Minute)
				if tc.watches > 0 && c.n.Load() == c.work.Load() {
					t.Errorf("%d requests counted in all, as many as without watches", c.n.Load())
				}
				if (err != nil) != tc.wantErr {
					t.Fatalf("error %v, want one: %v", err, tc.wantErr)
				}
				if took := time.Since(start); !tc.wantErr && (took < tc.wantAfter || took > tc.wantAfter+time.Second) {
					t.Errorf("returned after %v, want about %v", took, tc.wantAfter)
				}
			})
		})
	}
}

func TestLeaseDuration(t *testing.T) {
	for _, tc := range []struct {
		nodes int
		want  time.Duration
	}{
		{1, 40 * time.Second},
		{100, 40 * time.Second},
		{1000, 40 * time.Second},
		{2000, 80 * time.Second},
		{5000, 200 * time.Second},
	} {
		got := leaseDuration(tc.nodes)
		if got != tc.want {
			t.Errorf("%d nodes: %v, want %v", tc.nodes, got, tc.want)
		}
		// kwok renews at a quarter of the duration.
		if rate := float64(tc.nodes) / (got / 4).Seconds(); rate > maxLeaseWrites {
			t.Errorf("%d nodes: %.0f lease writes a second, more than %d", tc.nodes, rate, maxLeaseWrites)
		}
	}
}

func TestRenderReport(t *testing.T) {
	r := &Results{
		Meta:      Meta{Started: "2026-11-26T00:00:00Z", CPUs: 2, CPUModel: "cpu", MemoryGiB: 24, Kubernetes: "v1.37.1", Kwok: "v0.8.0", Commit: "abc"},
		Scenarios: []Scenario{ScenarioShare, ScenarioExtendedResource},
		Points: []Point{
			{Nodes: 5000, Scenario: "share", Model: ModelDefault, Fill: 0.5, PodsPerSec: 10},
			{Nodes: 5000, Scenario: "extended-resource", Fill: 0.5, PodsPerSec: 40},
		},
		Memory: []Memory{{Nodes: 5000, PeakMB: map[string]float64{"kube-apiserver": 3072, "kube-scheduler": 1024, "etcd": 1024}}},
	}
	got := RenderReport(r)
	for _, want := range []string{
		"| 5000 | default | 10.0 | 40.0 | 0.25 |\n",
		"| 5000 | default | share | default | 50% | 10.0 | 0.25 |",
		"- 5000 nodes: etcd 1024, kube-apiserver 3072, kube-scheduler 1024; all together at most 5.0 GiB.\n",
		"Measured 2026-11-26T00:00:00Z on 2 × cpu, 24 GiB",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if again := RenderReport(r); again != got {
		t.Error("the same results rendered twice differ")
	}
}

func TestPluginSample(t *testing.T) {
	kinds := []*kind{{profile: "a"}, {profile: "b"}, {profile: "c"}}
	for _, n := range []int{1, 30, 1000, 1001, 2500, 3000, 5000} {
		nodes := make([]*simNode, n)
		for i := range nodes {
			nodes[i] = &simNode{index: i, kind: kinds[i%len(kinds)]}
		}
		got := pluginSample(nodes)
		want := min(n, maxRunningPlugins)
		if len(got) > want || len(got) < want-len(kinds) {
			t.Errorf("%d nodes: %d in the sample, want %d (less at most one per profile)", n, len(got), want)
		}
		perKind := map[*kind]int{}
		for i, s := range got {
			if i > 0 && s.index <= got[i-1].index {
				t.Fatalf("%d nodes: the sample repeats or goes back at %d", n, s.index)
			}
			perKind[s.kind]++
		}
		for ki, k := range kinds[:min(n, len(kinds))] {
			nodesOfKind := (n - ki + len(kinds) - 1) / len(kinds)
			share := float64(nodesOfKind*want) / float64(n)
			if c := float64(perKind[k]); c <= share-1 || c > share {
				t.Errorf("%d nodes: %d of profile %s in the sample, want about %.0f", n, perKind[k], k.profile, share)
			}
		}
	}
}

func TestDeleteEach(t *testing.T) {
	names := func(objs ...string) listPage {
		return func(context.Context, metav1.ListOptions) ([]string, string, error) { return objs, "", nil }
	}
	paged := func(pages ...[]string) listPage {
		return func(_ context.Context, opts metav1.ListOptions) ([]string, string, error) {
			i := 0
			if opts.Continue != "" {
				i, _ = strconv.Atoi(opts.Continue)
			}
			next := ""
			if i+1 < len(pages) {
				next = strconv.Itoa(i + 1)
			}
			return pages[i], next, nil
		}
	}
	for _, tc := range []struct {
		name    string
		list    listPage
		fail    map[string]error
		want    []string
		wantErr string
	}{
		{name: "two pages", list: paged([]string{"a", "b"}, []string{"c"}), want: []string{"a", "b", "c"}},
		{name: "one already gone", list: names("a", "b"), fail: map[string]error{"a": apierrors.NewNotFound(v1.Resource("pods"), "a")}, want: []string{"a", "b"}},
		{name: "a delete fails", list: names("a", "b"), fail: map[string]error{"b": errors.New("boom")}, wantErr: "delete b of the pods of ns: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			deleted := map[string]bool{}
			// After the deletes the list is empty, unless one failed.
			list := func(ctx context.Context, opts metav1.ListOptions) ([]string, string, error) {
				mu.Lock()
				done := len(deleted) > 0
				mu.Unlock()
				if done && opts.Limit == 1 {
					return nil, "", nil
				}
				return tc.list(ctx, opts)
			}
			err := deleteEach(context.Background(), "pods of ns", list, func(_ context.Context, name string, opts metav1.DeleteOptions) error {
				if opts.GracePeriodSeconds == nil || *opts.GracePeriodSeconds != 0 {
					t.Errorf("%s deleted with grace %v, want 0", name, opts.GracePeriodSeconds)
				}
				mu.Lock()
				deleted[name] = true
				mu.Unlock()
				return tc.fail[name]
			})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := slices.Sorted(maps.Keys(deleted))
			if !slices.Equal(got, tc.want) {
				t.Errorf("deleted %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPageOf(t *testing.T) {
	kube := fake.NewClientset(
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns"}},
		&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "elsewhere"}},
	)
	pods := kube.CoreV1().Pods("ns")
	names, next, err := pageOf(pods.List)(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"a", "b"}) || next != "" {
		t.Errorf("names %v, continue %q; want [a b] of ns and no continue", names, next)
	}
	if err := deleteEach(context.Background(), "pods of ns", pageOf(pods.List), pods.Delete); err != nil {
		t.Fatal(err)
	}
	if left, err := kube.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil || len(left.Items) != 1 || left.Items[0].Name != "other" {
		t.Errorf("left %v (%v), want only elsewhere/other", left, err)
	}
}

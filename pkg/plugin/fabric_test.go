package plugin

import (
	"context"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/fabric"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// fakePorts is a PortChecker over a table of port states: every port is ready (ACTIVE,
// P_Keys 0xffff and 0x8001) unless the test says otherwise. It counts the checks.
type fakePorts struct {
	mu     sync.Mutex
	down   map[string]string // ibdev/port -> state
	pkeys  map[string][]uint16
	checks int
	// checked is signalled (without blocking) after every check.
	checked chan struct{}
}

func newFakePorts() *fakePorts {
	return &fakePorts{down: map[string]string{}, pkeys: map[string][]uint16{}, checked: make(chan struct{}, 1)}
}

func (f *fakePorts) set(port, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if state == "ACTIVE" {
		delete(f.down, port)
	} else {
		f.down[port] = state
	}
}

func (f *fakePorts) Check(p *discovery.Port, want fabric.Want) error {
	f.mu.Lock()
	defer func() {
		f.checks++
		f.mu.Unlock()
		select {
		case f.checked <- struct{}{}:
		default:
		}
	}()
	name := fmt.Sprintf("%s/%d", p.IBDev, p.Port)
	if s, ok := f.down[name]; ok {
		return &fabric.NotReady{Port: name, Reason: fabric.ReasonPortNotActive, Detail: s}
	}
	keys, ok := f.pkeys[name]
	if !ok {
		keys = []uint16{0xffff, 0x8001}
	}
	if want.PKey != nil && !slices.Contains(keys, *want.PKey) {
		return &fabric.NotReady{Port: name, Reason: fabric.ReasonPKeyMissing, Detail: fmt.Sprintf("P_Key 0x%04x not in the port's table", *want.PKey)}
	}
	return nil
}

// fabricTimeout is the gate's timeout in the tests.
const fabricTimeout = 2 * time.Minute

// gatedHarness is a dgx-h100 node whose InfiniBand ports are gated, a gate over it and
// its fake ports.
func gatedHarness(t *testing.T) (*harness, *FabricGate, *fakePorts) {
	t.Helper()
	h := newHarnessWithConfig(t, "dgx-h100", nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{
		Enabled: true, Include: []nodeconfig.Selector{{LinkTypes: []string{"InfiniBand"}}}}})
	ports := newFakePorts()
	g := NewFabricGate(FabricGateOptions{DriverName: testDriver, PoolName: testPool, Kube: h.kube, Devices: h.pub,
		Checker: ports, Timeout: fabricTimeout, RetryInterval: time.Second, Clock: h.clock})
	return h, g, ports
}

// gatedAlloc is an allocated device whose result carries the fabric binding conditions,
// as the scheduler copies them from the slice.
type gatedAlloc struct {
	alloc
	gated bool
}

// gatedClaim creates a claim allocated at h's clock minus age, with devices.
func (h *harness) gatedClaim(name string, age time.Duration, devices []gatedAlloc, configs ...resourceapi.DeviceAllocationConfiguration) *resourceapi.ResourceClaim {
	h.t.Helper()
	var plain []alloc
	for _, d := range devices {
		plain = append(plain, d.alloc)
	}
	c := h.claim(name, plain, configs...)
	c.Status.Allocation.AllocationTimestamp = &metav1.Time{Time: h.clock.Now().Add(-age)}
	for i, d := range devices {
		if d.gated {
			c.Status.Allocation.Devices.Results[i].BindingConditions = []string{devicemodel.FabricReadyCondition}
			c.Status.Allocation.Devices.Results[i].BindingFailureConditions = []string{devicemodel.FabricFailedCondition}
		}
	}
	updated, err := h.kube.ResourceV1().ResourceClaims(c.Namespace).UpdateStatus(h.ctx, c, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return updated
}

// trimmed is the claim as the gate's informer keeps it.
func trimmed(t *testing.T, c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	t.Helper()
	if kept := trimClaim(testDriver, testPool)(c.DeepCopy()); kept != nil {
		return kept
	}
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: c.Name, UID: c.UID}}
}

// fabricConds returns, per device of the claim's status entries of the driver, the
// fabric conditions as "Type=Status Reason: Message".
func (h *harness) fabricConds(name string) map[string][]string {
	h.t.Helper()
	c, err := h.kube.ResourceV1().ResourceClaims("ns").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	out := map[string][]string{}
	for _, ds := range c.Status.Devices {
		if ds.Driver != testDriver {
			continue
		}
		for _, cond := range ds.Conditions {
			if slices.Contains(fabricConditionTypes, cond.Type) {
				out[ds.Device] = append(out[ds.Device], fmt.Sprintf("%s=%s %s: %s", strings.TrimPrefix(cond.Type, "rdma.dra.io/"), cond.Status, cond.Reason, cond.Message))
			}
		}
	}
	return out
}

func gated(device string) gatedAlloc { return gatedAlloc{alloc{request: "rdma", device: device}, true} }

func TestFabricGateSync(t *testing.T) {
	// The class grants the P_Key and the claim names it.
	pkeyConfigs := []resourceapi.DeviceAllocationConfiguration{
		opaque(resourceapi.AllocationConfigSourceClass, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedNetwork":{"pkeys":["0x8002"]}}`),
		opaque(resourceapi.AllocationConfigSourceClaim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"pkey":"0x8002"}}`),
	}
	tests := []struct {
		name    string
		devices []gatedAlloc
		configs []resourceapi.DeviceAllocationConfiguration
		down    map[string]string
		age     time.Duration
		want    map[string][]string
		// wantRetry: the claim is still waiting.
		wantRetry bool
	}{
		{name: "ready", devices: []gatedAlloc{gated("mlx5-0-p1")},
			want: map[string][]string{"mlx5-0-p1": {"FabricReady=True PortReady: port mlx5_0/1 is ready"}}},
		{name: "a share is answered in its own entry", devices: []gatedAlloc{{alloc{request: "rdma", device: "mlx5-0-p1-shared", shareID: "2d2e9b6c-0000-4000-8000-000000000001"}, true}},
			want: map[string][]string{"mlx5-0-p1-shared": {"FabricReady=True PortReady: port mlx5_0/1 is ready"}}},
		{name: "port DOWN: waits", devices: []gatedAlloc{gated("mlx5-2-p1")}, down: map[string]string{"mlx5_2/1": "DOWN"}, wantRetry: true,
			want: map[string][]string{"mlx5-2-p1": {"FabricReady=False PortNotActive: port mlx5_2/1 is DOWN"}}},
		{name: "the claim's P_Key is missing", devices: []gatedAlloc{gated("mlx5-0-p1")}, configs: pkeyConfigs, wantRetry: true,
			want: map[string][]string{"mlx5-0-p1": {"FabricReady=False PKeyMissing: port mlx5_0/1: P_Key 0x8002 not in the port's table"}}},
		{name: "timed out: failed with what was missing", devices: []gatedAlloc{gated("mlx5-2-p1")}, down: map[string]string{"mlx5_2/1": "DOWN"}, age: fabricTimeout,
			want: map[string][]string{"mlx5-2-p1": {
				"FabricReady=False PortNotActive: port mlx5_2/1 is DOWN",
				"FabricFailed=True FabricNotReadyInTime: port mlx5_2/1 is DOWN"}}},
		{name: "one device ready, one not: each says so", devices: []gatedAlloc{gated("mlx5-0-p1"), gated("mlx5-2-p1")}, down: map[string]string{"mlx5_2/1": "INIT"}, wantRetry: true,
			want: map[string][]string{
				"mlx5-0-p1": {"FabricReady=True PortReady: port mlx5_0/1 is ready"},
				"mlx5-2-p1": {"FabricReady=False PortNotActive: port mlx5_2/1 is INIT"}}},
		{name: "admin access does not wait", devices: []gatedAlloc{{alloc{request: "rdma", device: "mlx5-2-p1", admin: true}, true}}, down: map[string]string{"mlx5_2/1": "DOWN"},
			want: map[string][]string{"mlx5-2-p1": {"FabricReady=True AdminAccess: admin access does not wait for the fabric"}}},
		{name: "no binding conditions: not the gate's", devices: []gatedAlloc{{alloc{request: "rdma", device: "mlx5-2-p1"}, false}}, down: map[string]string{"mlx5_2/1": "DOWN"},
			want: map[string][]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, g, ports := gatedHarness(t)
			for p, s := range tt.down {
				ports.set(p, s)
			}
			c := h.gatedClaim("c", tt.age, tt.devices, tt.configs...)
			retry, err := g.sync(h.ctx, trimmed(t, c))
			if err != nil {
				t.Fatal(err)
			}
			if (retry > 0) != tt.wantRetry {
				t.Errorf("retry after %v, want waiting %v", retry, tt.wantRetry)
			}
			if got := h.fabricConds("c"); !equalConds(got, tt.want) {
				t.Errorf("conditions\n got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func equalConds(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestFabricGateWaitsThenAnswers follows one claim through the gate's life: waiting while
// the port is down (written once, not on every retry), ready when it comes up, and never
// written again once settled; and another whose port stays down until the timeout.
func TestFabricGateWaitsThenAnswers(t *testing.T) {
	h, g, ports := gatedHarness(t)
	ports.set("mlx5_3/1", "DOWN")
	h.gatedClaim("c", 0, []gatedAlloc{gated("mlx5-3-p1")})
	patches := func() int {
		n := 0
		for _, a := range h.kube.Actions() {
			if a.GetVerb() == "patch" && a.GetSubresource() == "status" {
				n++
			}
		}
		return n
	}
	sync := func() time.Duration {
		t.Helper()
		current, err := h.kube.ResourceV1().ResourceClaims("ns").Get(h.ctx, "c", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		retry, err := g.sync(h.ctx, trimmed(t, current))
		if err != nil {
			t.Fatal(err)
		}
		return retry
	}
	if retry := sync(); retry != time.Second {
		t.Fatalf("retry after %v, want the retry interval", retry)
	}
	h.clock.Step(time.Second)
	if retry := sync(); retry != time.Second {
		t.Fatalf("second look: retry after %v, want the retry interval", retry)
	}
	if n := patches(); n != 1 {
		t.Errorf("%d status patches while the port stayed down, want 1", n)
	}
	ports.set("mlx5_3/1", "ACTIVE")
	h.clock.Step(time.Second)
	if retry := sync(); retry != 0 {
		t.Fatalf("retry after %v once ready, want settled", retry)
	}
	want := map[string][]string{"mlx5-3-p1": {"FabricReady=True PortReady: port mlx5_3/1 is ready"}}
	if got := h.fabricConds("c"); !equalConds(got, want) {
		t.Errorf("conditions %v, want %v", got, want)
	}
	// Settled: the port failing later changes nothing for this allocation.
	ports.set("mlx5_3/1", "DOWN")
	checks := ports.checks
	if retry := sync(); retry != 0 || ports.checks != checks || patches() != 2 {
		t.Errorf("a settled claim was looked at again: retry %v, %d more checks, %d patches", retry, ports.checks-checks, patches())
	}

	// A second claim on a port that stays down fails at the timeout, not before.
	ports.set("mlx5_4/1", "DOWN")
	h.gatedClaim("d", 0, []gatedAlloc{gated("mlx5-4-p1")})
	syncD := func() time.Duration {
		current, err := h.kube.ResourceV1().ResourceClaims("ns").Get(h.ctx, "d", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		retry, err := g.sync(h.ctx, trimmed(t, current))
		if err != nil {
			t.Fatal(err)
		}
		return retry
	}
	syncD()
	h.clock.Step(fabricTimeout - time.Second)
	if retry := syncD(); retry == 0 {
		t.Fatalf("settled a second before the timeout: %v", h.fabricConds("d"))
	}
	h.clock.Step(time.Second)
	if retry := syncD(); retry != 0 {
		t.Fatalf("still waiting at the timeout")
	}
	wantD := map[string][]string{"mlx5-4-p1": {
		"FabricReady=False PortNotActive: port mlx5_4/1 is DOWN",
		"FabricFailed=True FabricNotReadyInTime: port mlx5_4/1 is DOWN"}}
	if got := h.fabricConds("d"); !equalConds(got, wantD) {
		t.Errorf("conditions %v, want %v", got, wantD)
	}
}

// TestFabricConditionsSurviveOtherWriters: the gate keeps other drivers' entries and
// prepare's Ready condition and data, and the status writer, which replaces this
// driver's entries when the claim is prepared, keeps the gate's conditions.
func TestFabricConditionsSurviveOtherWriters(t *testing.T) {
	h, g, _ := gatedHarness(t)
	c := h.gatedClaim("c", 0, []gatedAlloc{gated("mlx5-0-p1")})
	c.Status.Devices = []resourceapi.AllocatedDeviceStatus{{Driver: "gpu.example.com", Pool: "node-1-gpu", Device: "gpu-0",
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "R", LastTransitionTime: metav1.Now()}}}}
	c, err := h.kube.ResourceV1().ResourceClaims("ns").UpdateStatus(h.ctx, c, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.sync(h.ctx, trimmed(t, c)); err != nil {
		t.Fatal(err)
	}
	// Prepare now writes its status (the pod was bound).
	d := h.driver()
	if r := prepareOne(t, d, c); r.Err != nil {
		t.Fatal(r.Err)
	}
	if err := d.status.WaitIdle(h.ctx); err != nil {
		t.Fatal(err)
	}
	got, err := h.kube.ResourceV1().ResourceClaims("ns").Get(h.ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ds := range got.Status.Devices {
		for _, cond := range ds.Conditions {
			types = append(types, ds.Driver+"/"+ds.Device+":"+cond.Type+"="+string(cond.Status))
		}
		if ds.Driver == testDriver && ds.Data == nil {
			t.Errorf("prepare's data missing from %s", ds.Device)
		}
	}
	slices.Sort(types)
	want := []string{
		"gpu.example.com/gpu-0:Ready=True",
		"rdma.dra.io/mlx5-0-p1:Ready=True",
		"rdma.dra.io/mlx5-0-p1:rdma.dra.io/FabricReady=True",
	}
	if !slices.Equal(types, want) {
		t.Errorf("conditions after gate and prepare\n got %v\nwant %v", types, want)
	}
}

// TestPrepareChecksGatedPorts: where the API server drops binding conditions nothing holds
// the pod before prepare, so prepare refuses a gated device whose port is not ready, with
// the gate's message, writes nothing, and succeeds once the port is ready. Ports that
// are not gated and admin-access allocations are not checked.
func TestPrepareChecksGatedPorts(t *testing.T) {
	h, _, ports := gatedHarness(t)
	d := h.driver()
	d.fabric = ports
	ports.set("mlx5_2/1", "DOWN")
	ports.set("mlx5_8/1", "DOWN")

	c := h.claim("c", []alloc{{request: "rdma", device: "mlx5-2-p1"}})
	r := prepareOne(t, d, c)
	want := `request "rdma", device "mlx5-2-p1": fabric not ready: port mlx5_2/1 is DOWN`
	if r.Err == nil || r.Err.Error() != want {
		t.Fatalf("prepare = %v, want %q", r.Err, want)
	}
	if specs := files(t, h.cdiDir); len(specs) != 0 {
		t.Errorf("CDI specs written for a claim that was refused: %v", specs)
	}
	if phases := h.checkpointClaims(); len(phases) != 0 {
		t.Errorf("checkpoint keeps the refused claim: %v", phases)
	}
	ports.set("mlx5_2/1", "ACTIVE")
	if r := prepareOne(t, d, c); r.Err != nil {
		t.Fatalf("prepare once the port is up: %v", r.Err)
	}

	// mlx5_8 is RoCE, which the harness does not gate; an admin claim observes anyway.
	if r := prepareOne(t, d, h.claim("roce", []alloc{{request: "rdma", device: "mlx5-8-p1"}})); r.Err != nil {
		t.Errorf("a port that is not gated was checked: %v", r.Err)
	}
	ports.set("mlx5_3/1", "DOWN")
	if r := prepareOne(t, d, h.claim("monitor", []alloc{{request: "rdma", device: "mlx5-3-p1", admin: true}})); r.Err != nil {
		t.Errorf("an admin-access claim was held back: %v", r.Err)
	}
}

// TestFabricGateRun runs the gate as the plugin does, through its informer and work
// queue on the fake clock: a claim allocated on a port that is down gets FabricReady
// False, and True once the port comes up and the next retry looks.
func TestFabricGateRun(t *testing.T) {
	h, g, ports := gatedHarness(t)
	g.opts.Timeout = time.Hour // the loop below steps the fake clock freely
	ports.set("mlx5_5/1", "DOWN")
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	w, err := h.kube.ResourceV1().ResourceClaims("ns").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	h.gatedClaim("c", 0, []gatedAlloc{gated("mlx5-5-p1")})
	waitCondition(t, ctx, w, metav1.ConditionFalse)

	ports.set("mlx5_5/1", "ACTIVE")
	// The retry is a delayed add on the fake clock: step it until the gate looks again.
	for looked := false; !looked; {
		h.clock.Step(time.Second)
		select {
		case <-ports.checked:
			looked = true
		case <-ctx.Done():
			t.Fatal("the gate did not look again")
		default:
			goruntime.Gosched()
		}
	}
	waitCondition(t, ctx, w, metav1.ConditionTrue)
	cancel()
	<-done
}

// waitCondition waits for a watch event in which the claim's FabricReady has status.
func waitCondition(t *testing.T, ctx context.Context, w watch.Interface, status metav1.ConditionStatus) {
	t.Helper()
	for {
		select {
		case ev := <-w.ResultChan():
			c, ok := ev.Object.(*resourceapi.ResourceClaim)
			if !ok {
				continue
			}
			for _, ds := range c.Status.Devices {
				for _, cond := range ds.Conditions {
					if cond.Type == devicemodel.FabricReadyCondition && cond.Status == status {
						return
					}
				}
			}
		case <-ctx.Done():
			t.Fatalf("no FabricReady=%s", status)
		}
	}
}

// TestFabricGateStopsWhenDropped: once the API server is known to drop binding
// conditions, Run returns (and does not start when told before).
func TestFabricGateStopsWhenDropped(t *testing.T) {
	h, g, _ := gatedHarness(t)
	ctx, cancel := context.WithTimeout(h.ctx, time.Minute)
	defer cancel()
	g.BindingConditionsDropped(h.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Run(ctx)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("Run did not return after BindingConditionsDropped")
	}
	for _, a := range h.kube.Actions() {
		if a.GetResource().Resource == "resourceclaims" && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
			t.Errorf("the stopped gate called %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestFabricGateMemoryAt10000Claims measures what the gate keeps of a cluster's 10,000
// claims, 10 of which wait for this node, on top of the fake API server's own copies,
// against keeping every claim as an informer would: docs/kubelet-plugin.md quotes the
// figures.
func TestFabricGateMemoryAt10000Claims(t *testing.T) {
	const claims, waiting = 10000, 10
	objects := make([]runtime.Object, 0, claims)
	for i := range claims {
		c := bulkClaim(i)
		if i < waiting {
			c.Status.Allocation.Devices.Results[0].Pool = testPool
			c.Status.Allocation.Devices.Results[0].BindingConditions = []string{devicemodel.FabricReadyCondition}
		}
		objects = append(objects, &c)
	}
	heap := func() uint64 {
		goruntime.GC()
		goruntime.GC()
		var ms goruntime.MemStats
		goruntime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	measure := func(keepAll bool) (uint64, int) {
		kube := fake.NewClientset(objects...)
		// Status goes to an API server of its own, where the claims are not: the fake's
		// field manager would keep megabytes of its own on the first patch.
		g := NewFabricGate(FabricGateOptions{DriverName: testDriver, PoolName: testPool, Kube: kube, StatusKube: fake.NewClientset(),
			Devices: mapLookup{}, Checker: newFakePorts(), Timeout: time.Hour})
		if keepAll {
			g.trim = func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim { return c }
		}
		// A first list warms up what the client keeps for good (codecs), so that it does
		// not count as the gate's.
		if _, err := kube.ResourceV1().ResourceClaims("").List(context.Background(), metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		before := heap()
		ctx, cancel := context.WithCancel(context.Background())
		listed := make(chan struct{})
		g.synced = func() { close(listed) }
		done := make(chan struct{})
		go func() {
			defer close(done)
			g.Run(ctx)
		}()
		<-listed
		after := heap()
		kept := g.store.len()
		cancel()
		<-done
		goruntime.KeepAlive(kube)
		if after < before {
			return 0, kept
		}
		return after - before, kept
	}
	gateBytes, gateKept := measure(false)
	allBytes, allKept := measure(true)
	t.Logf("%d claims, %d waiting for the node: the gate keeps %d claims in %.2f MiB; keeping all (%d) takes %.1f MiB", claims, waiting,
		gateKept, float64(gateBytes)/(1<<20), allKept, float64(allBytes)/(1<<20))
	if gateKept != waiting {
		t.Errorf("the gate keeps %d claims, want the %d waiting for the node", gateKept, waiting)
	}
	if allKept != claims {
		t.Errorf("keeping all holds %d claims, want %d", allKept, claims)
	}
	if gateBytes > 1<<20 {
		t.Errorf("the gate holds %d bytes for %d claims, budget 1 MiB", gateBytes, claims)
	}
}

// mapLookup finds no device; the memory test never looks one up.
type mapLookup struct{}

func (mapLookup) Lookup(string, string) (devicemodel.Device, bool) {
	return devicemodel.Device{}, false
}

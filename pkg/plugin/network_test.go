package plugin

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// fakeAttacher records what the driver asks of the node's network and answers like the
// real Attacher: it journals before it "acts", and a successful attach reports the pod
// addresses and a GID index.
type fakeAttacher struct {
	mu       sync.Mutex
	attached map[string]netattach.State // by pod/podIfName
	calls    []string
	// failAfterJournal makes the next Attach fail after its first journal save, leaving
	// the state as a crash there would (Phase Attaching, not undone).
	failAfterJournal bool
	gid              int
}

func newFakeAttacher() *fakeAttacher {
	return &fakeAttacher{attached: map[string]netattach.State{}, gid: 7}
}

func (f *fakeAttacher) Attach(_ context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := netattach.State{Spec: spec, Target: target, Phase: netattach.PhaseAttaching, TempName: "rdt0"}
	if err := save(st); err != nil {
		return st, err
	}
	f.calls = append(f.calls, "attach "+target.PodUID+" "+spec.PodIfName)
	if f.failAfterJournal {
		f.failAfterJournal = false
		return st, errors.New("simulated crash")
	}
	st.Phase = netattach.PhaseAttached
	st.PodAddresses = spec.Addresses
	st.HardwareAddr = "02:00:00:00:00:01"
	if spec.Mode != netattach.ModeIPoIB && spec.Mode != netattach.ModeNone {
		g := f.gid
		st.GIDIndex = &g
	}
	f.attached[target.PodUID+"/"+spec.PodIfName] = st
	return st, nil
}

func (f *fakeAttacher) Detach(_ context.Context, st netattach.State, save netattach.Journal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	st.Phase = netattach.PhaseDetaching
	if err := save(st); err != nil {
		return err
	}
	f.calls = append(f.calls, "detach "+st.Target.PodUID+" "+st.Spec.PodIfName)
	delete(f.attached, st.Target.PodUID+"/"+st.Spec.PodIfName)
	return nil
}

func (f *fakeAttacher) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// networkDriver is a driver of h with network attachment through f, connected to NRI,
// with an address pool for the RoCE ports of dgx-h100.
func (h *harness) networkDriver(f *fakeAttacher) *Driver {
	h.t.Helper()
	return h.networkDriverWith(f, "")
}

// networkDriverWith is networkDriver keeping attachment marks in markDir (empty: none),
// with CDI specs whose hook waits for them.
func (h *harness) networkDriverWith(f *fakeAttacher, markDir string) *Driver {
	h.t.Helper()
	return h.startNetworkDriver(testDriver, newTestSpecs(h, markDir), h.networkOptions(f, markDir))
}

// networkOptions is the network attachment of networkDriverWith through a.
func (h *harness) networkOptions(a podnet.Attacher, markDir string) *NetworkOptions {
	h.t.Helper()
	pools, err := nodeconfig.Parse([]byte(`
network:
  addressPools:
  - name: storage
    selector: {linkTypes: [Ethernet]}
    subnet: 192.168.77.0/24
    rangeStart: 192.168.77.100
    rangeEnd: 192.168.77.102
`))
	if err != nil {
		h.t.Fatal(err)
	}
	return &NetworkOptions{Attacher: a, Pools: &pools, Socket: "/run/nri/nri.sock", MarkDir: markDir,
		Addresses: &addrlease.Reserver{Kube: h.kube, Namespace: "rdma-dra-driver", Node: testNode}}
}

// startNetworkDriver is a driver of h named driver with network attachment as net,
// connected to NRI, its status writer running until the test ends.
func (h *harness) startNetworkDriver(driver string, specs SpecWriter, net *NetworkOptions) *Driver {
	h.t.Helper()
	d, err := NewDriver(h.ctx, DriverOptions{
		DriverName: driver, NodeName: testNode, Kube: h.kube,
		Store:   checkpoint.NewStore(h.dataDir, h.bootPath),
		Specs:   specs,
		Devices: h.pub, Clock: h.clock, CleanupGrace: -1,
		Network: net,
	})
	if err != nil {
		h.t.Fatal(err)
	}
	d.net.SetConnected(true, nil)
	ctx, cancel := context.WithCancel(h.ctx)
	h.t.Cleanup(cancel)
	go d.RunStatusWriter(ctx)
	return d
}

func newTestSpecs(h *harness, markDir string) SpecWriter {
	if markDir != "" {
		return cdi.NewWriter(cdi.Options{SpecDir: h.cdiDir, DevRoot: "/dev", HookPath: testHookPath, AttachedDir: markDir, Exists: func(string) bool { return true }})
	}
	d, err := h.newDriver()
	if err != nil {
		h.t.Fatal(err)
	}
	return d.specs
}

// reservedFor makes the claim reserved for the pods, as the scheduler does.
func (h *harness) reservedFor(claim *resourceapi.ResourceClaim, pods ...string) *resourceapi.ResourceClaim {
	h.t.Helper()
	for _, p := range pods {
		claim.Status.ReservedFor = append(claim.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: "pod-" + p, UID: types.UID(p)})
	}
	updated, err := h.kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(h.ctx, claim, metav1.UpdateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return updated
}

// macvlanNode is a class config: the admin's macvlan with addresses of the storage pool.
const macvlanNode = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan","ipam":"node","mtu":9000,"socketInterface":true},"allowedNetwork":{"addressPools":["storage"]}}`

// openClass is a class config that grants every network mode, the storage pool, static
// addresses and routes in 192.168.0.0/16, the net* interface names and P_Key 0x8001.
const openClass = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedNetwork":{"modes":["macvlan","ipvlan","move","ipoib"],` +
	`"addressPools":["storage"],"staticAddressPrefixes":["192.168.0.0/16"],"routePrefixes":["192.168.0.0/16"],"interfaceNamePrefixes":["roce","net"],"maxMTU":9000,"pkeys":["0x8001"]}}`

func TestNetworkPrepareWithoutNRI(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.driver()
	claim := h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode))
	res := prepareOne(t, d, claim)
	want := `request "rdma": device mlx5-8-p1-shared asks for network mode macvlan, but network attachment is not available on this node: the plugin runs with --network-attachment=false`
	if res.Err == nil || !strings.Contains(res.Err.Error(), want) {
		t.Fatalf("prepare error %v, want it to contain %q", res.Err, want)
	}

	// Enabled but not connected: the reason names the socket.
	f := newFakeAttacher()
	d = h.networkDriver(f)
	d.net.SetConnected(false, errors.New("dial unix /run/nri/nri.sock: connect: no such file or directory"))
	res = prepareOne(t, d, claim)
	want = "the plugin is not connected to the container runtime's NRI socket /run/nri/nri.sock"
	if res.Err == nil || !strings.Contains(res.Err.Error(), want) {
		t.Fatalf("prepare error %v, want it to contain %q", res.Err, want)
	}
}

func TestNetworkPrepareChecks(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	d := h.networkDriver(newFakeAttacher())
	share := "11111111-1111-4111-8111-111111111111"
	tests := []struct {
		name    string
		devices []alloc
		config  string
		want    string
	}{
		{"move needs the whole port", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: share}}, `{"mode":"move"}`,
			`network mode move: moves the port's netdev into one pod and needs the whole port: use macvlan or ipvlan for shares`},
		{"macvlan on InfiniBand", []alloc{{request: "rdma", device: "mlx5-0-p1"}}, `{"mode":"macvlan","ipam":"node"}`,
			`network mode macvlan: needs an Ethernet (RoCE) port, this one is InfiniBand: use ipoib for InfiniBand`},
		{"ipoib on RoCE", []alloc{{request: "rdma", device: "mlx5-8-p1"}}, `{"mode":"ipoib"}`,
			`network mode ipoib: needs an InfiniBand port, this one is Ethernet: use macvlan or ipvlan for RoCE`},
		{"ipam node without a pool", []alloc{{request: "rdma", device: "mlx5-0-p1"}}, `{"mode":"ipoib","ipam":"node"}`,
			`ipam: node, but none of the address pools the DeviceClass allows (allowedNetwork.addressPools [storage]) selects this port on this node`},
		{"static address in a pool's range", []alloc{{request: "rdma", device: "mlx5-8-p1"}}, `{"mode":"macvlan","addresses":["192.168.77.101/24"]}`,
			`static address 192.168.77.101/24 lies in the range of address pool storage of the node configuration`},
		{"one static address for two devices", []alloc{{request: "rdma", device: "mlx5-8-p1"}, {request: "rdma", device: "mlx5-9-p1"}},
			`{"mode":"macvlan","addresses":["192.168.77.5/24"]}`,
			`static address 192.168.77.5/24 of request "rdma" would go to devices mlx5-8-p1 and mlx5-9-p1: static addresses apply to one device, use ipam: node for requests of several devices`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			claim := h.claim("c"+string(rune('a'+i)), tc.devices, opaque(resourceapi.AllocationConfigSourceClass, openClass),
				opaque(resourceapi.AllocationConfigSourceClaim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":`+tc.config+`}`))
			res := prepareOne(t, d, claim)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Fatalf("prepare error %v, want it to contain %q", res.Err, tc.want)
			}
		})
	}
}

func TestNetworkAttachLifecycle(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	d := h.networkDriver(f)
	ctx := h.ctx
	a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-a")
	b := h.reservedFor(h.claim("b", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "22222222-2222-4222-8222-222222222222"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-b")
	for _, c := range []*resourceapi.ResourceClaim{a, b} {
		if res := prepareOne(t, d, c); res.Err != nil {
			t.Fatalf("prepare %s: %v", c.Name, res.Err)
		}
	}
	// The host's GID index is no use in the pod: the CDI spec leaves it out.
	spec, err := os.ReadFile(filepath.Join(h.cdiDir, specFileOf(t, h.cdiDir, string(a.UID))))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(spec), "NCCL_IB_GID_INDEX") {
		t.Errorf("CDI spec of an attached claim sets NCCL_IB_GID_INDEX:\n%s", spec)
	}

	net := d.net
	for _, pod := range []string{"pod-a", "pod-b"} {
		if err := net.AttachPod(ctx, pod, "ns/"+pod, "/var/run/netns/cni-"+pod); err != nil {
			t.Fatalf("attach %s: %v", pod, err)
		}
	}
	// A second event for the same pod (a second plugin instance, a repeated event)
	// changes nothing.
	if err := net.AttachPod(ctx, "pod-a", "ns/pod-a", "/var/run/netns/cni-pod-a"); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"attach pod-a rdma0", "attach pod-b rdma0"}, f.callList()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	gotA, gotB := f.attached["pod-a/rdma0"], f.attached["pod-b/rdma0"]
	if gotA.Spec.HostNetdev != "enp168s0f0np0" || gotA.Spec.MTU != 9000 || gotA.Spec.Mode != netattach.ModeMacvlan || gotA.Spec.IBDevice != "mlx5_8" {
		t.Errorf("spec of pod-a: %+v", gotA.Spec)
	}
	if got := prefixes(gotA.Spec.Addresses); got != "192.168.77.100/24" {
		t.Errorf("pod-a addresses %s, want 192.168.77.100/24", got)
	}
	if got := prefixes(gotB.Spec.Addresses); got != "192.168.77.101/24" {
		t.Errorf("pod-b addresses %s, want 192.168.77.101/24", got)
	}

	// The container that has the port's uverbs device gets the pod's GID index; one
	// without it gets nothing.
	uverbs := uverbsOf(t, h, "mlx5-8-p1-shared")
	env, err := net.ContainerEnv(ctx, "pod-a", []string{uverbs, "/dev/null"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"NCCL_IB_GID_INDEX": "7", "UCX_IB_GID_INDEX": "7", "NCCL_SOCKET_IFNAME": "=rdma0"}
	if diff := cmp.Diff(want, env); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	if env, err := net.ContainerEnv(ctx, "pod-a", []string{"/dev/null"}); err != nil || len(env) != 0 {
		t.Errorf("container without the device: env %v, err %v", env, err)
	}

	// The claim's status carries what the pod got.
	got := waitForNetworkData(t, h, "a")
	nd := got.Status.Devices[0].NetworkData
	if nd.InterfaceName != "rdma0" || len(nd.IPs) != 1 || nd.IPs[0] != "192.168.77.100/24" || nd.HardwareAddress != "02:00:00:00:00:01" {
		t.Errorf("networkData of a: %+v", nd)
	}

	// Stopping pod-a detaches it and returns its address: the next pod gets it.
	if err := net.DetachPod(ctx, "pod-a"); err != nil {
		t.Fatal(err)
	}
	c := h.reservedFor(h.claim("c", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "33333333-3333-4333-8333-333333333333"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-c")
	if res := prepareOne(t, d, c); res.Err != nil {
		t.Fatal(res.Err)
	}
	// A restarted plugin knows the addresses in use from the checkpoint.
	f2 := newFakeAttacher()
	d2 := h.networkDriver(f2)
	if err := d2.net.AttachPod(ctx, "pod-c", "ns/pod-c", "/var/run/netns/cni-pod-c"); err != nil {
		t.Fatal(err)
	}
	if got := f2.attached["pod-c/rdma0"].Spec.Addresses; len(got) != 1 || got[0].String() != "192.168.77.100/24" {
		t.Errorf("pod-c got %v, want the address pod-a gave back", got)
	}
	// Unprepare undoes what the runtime's events left attached (pod-b was never stopped).
	unprepareOne(t, d2, b)
	if calls := f2.callList(); calls[len(calls)-1] != "detach pod-b rdma0" {
		t.Errorf("unprepare of b: calls %v, want a detach of pod-b last", calls)
	}
}

func TestNetworkAttachConvergesAfterCrash(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	d := h.networkDriver(f)
	a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-9-p1"}},
		opaque(resourceapi.AllocationConfigSourceClass, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"keepHostAddress":true},"allowedNetwork":{"modes":["move"],"interfaceNamePrefixes":["roce"]}}`),
		opaque(resourceapi.AllocationConfigSourceClaim, `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"move","interfaceName":"roce0"}}`)), "pod-a")
	if res := prepareOne(t, d, a); res.Err != nil {
		t.Fatal(res.Err)
	}
	f.failAfterJournal = true
	// The same node through an attacher that crashes.
	d = h.startNetworkDriver(testDriver, newTestSpecs(h, ""), h.networkOptions(crashingAttacher{f}, ""))
	if err := d.net.AttachPod(h.ctx, "pod-a", "ns/pod-a", "/var/run/netns/cni-a"); err == nil {
		t.Fatal("attach succeeded, want the simulated crash")
	}
	// A new process finds the interrupted attachment, undoes it, and attaches again.
	d2 := h.networkDriver(f)
	if err := d2.net.AttachPod(h.ctx, "pod-a", "ns/pod-a", "/var/run/netns/cni-a"); err != nil {
		t.Fatal(err)
	}
	want := []string{"attach pod-a roce0", "detach pod-a roce0", "attach pod-a roce0"}
	if diff := cmp.Diff(want, f.callList()); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	st := f.attached["pod-a/roce0"]
	if st.Spec.Mode != netattach.ModeMove || st.Spec.HostNetdev != "enp168s0f1np1" || !st.Spec.KeepHostAddress {
		t.Errorf("move spec: %+v", st.Spec)
	}
}

// crashingAttacher leaves an attach as a crash would: the journal says Attaching and
// nothing is undone (a real attacher undoes a failure it survives).
type crashingAttacher struct{ *fakeAttacher }

func (c crashingAttacher) Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error) {
	st, err := c.fakeAttacher.Attach(ctx, spec, target, save)
	if err != nil {
		st.Phase = netattach.PhaseAttaching
	}
	return st, err
}

func prefixes(ps []netip.Prefix) string {
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return strings.Join(out, ",")
}

func uverbsOf(t *testing.T, h *harness, device string) string {
	t.Helper()
	dev, ok := h.pub.Lookup(testPool, device)
	if !ok || dev.Port.Verbs == nil {
		t.Fatalf("device %s not published with a uverbs device", device)
	}
	return "/dev/infiniband/" + dev.Port.Verbs.Name
}

func specFileOf(t *testing.T, dir, uid string) string {
	t.Helper()
	for _, name := range files(t, dir) {
		if strings.Contains(name, uid) {
			return name
		}
	}
	t.Fatalf("no CDI spec of claim %s in %v", uid, files(t, dir))
	return ""
}

func waitForNetworkData(t *testing.T, h *harness, name string) *resourceapi.ResourceClaim {
	t.Helper()
	var got *resourceapi.ResourceClaim
	if !testwait.Poll(func() bool {
		var err error
		if got, err = h.kube.ResourceV1().ResourceClaims("ns").Get(context.Background(), name, metav1.GetOptions{}); err != nil {
			t.Fatal(err)
		}
		return len(got.Status.Devices) > 0 && got.Status.Devices[0].NetworkData != nil
	}) {
		t.Fatalf("claim %s: no networkData in status after %s: %+v", name, testwait.Timeout, got.Status.Devices)
	}
	return got
}

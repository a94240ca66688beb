package plugin

import (
	"net/netip"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
)

// TestNetworkPolicyAtPrepare: prepare is the source of truth of the tenant boundary on
// clusters without the webhook. A claim's network section beyond its class's
// allowedNetwork is refused with the field, the class's limit and no change to the node:
// no CDI spec, no checkpoint entry, nothing attached, and a claim prepared before is
// left as it was.
func TestNetworkPolicyAtPrepare(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	d := h.networkDriver(f)
	running := h.reservedFor(h.claim("running", []alloc{{request: "rdma", device: "mlx5-8-p1-shared", shareID: "11111111-1111-4111-8111-111111111111"}},
		opaque(resourceapi.AllocationConfigSourceClass, macvlanNode)), "pod-running")
	if res := prepareOne(t, d, running); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := d.net.AttachPod(h.ctx, "pod-running", "ns/pod-running", "/var/run/netns/cni-running"); err != nil {
		t.Fatal(err)
	}
	before := h.checkpointClaims()
	specsBefore := files(t, h.cdiDir)

	const cfg = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":`
	share := "22222222-2222-4222-8222-222222222222"
	tests := []struct {
		name    string
		device  alloc
		class   string // a class config; empty: none
		network string // the claim's network section
		want    string
	}{
		{"macvlan on a class without network", alloc{request: "rdma", device: "mlx5-8-p1-shared", shareID: share}, "", `{"mode":"macvlan","ipam":"node"}`,
			`network.mode: Forbidden: "macvlan" is not allowed: the DeviceClass configures no network attachment`},
		{"move on a class without network", alloc{request: "rdma", device: "mlx5-9-p1"}, "", `{"mode":"move"}`, `network.mode: Forbidden`},
		{"move on a macvlan class", alloc{request: "rdma", device: "mlx5-9-p1"}, macvlanNode, `{"mode":"move"}`,
			`"move" is not allowed: the DeviceClass's allowedNetwork.modes are ["macvlan"]`},
		{"keepHostAddress from a claim", alloc{request: "rdma", device: "mlx5-9-p1"}, openClass, `{"mode":"move","keepHostAddress":true}`,
			`network.keepHostAddress: Forbidden: moves the node's own addresses into the pod: only a DeviceClass config may set it`},
		{"a static address on a class that allows none", alloc{request: "rdma", device: "mlx5-8-p1-shared", shareID: share}, macvlanNode,
			`{"addresses":["10.0.0.5/24"]}`, `network.addresses[0]: Forbidden: static addresses are not allowed`},
		{"a static address outside the class's prefixes", alloc{request: "rdma", device: "mlx5-8-p1"}, openClass,
			`{"mode":"macvlan","addresses":["10.0.0.5/24"]}`, `10.0.0.5/24 is not inside one of the DeviceClass's allowedNetwork.staticAddressPrefixes ["192.168.0.0/16"]`},
		{"a route on a macvlan class", alloc{request: "rdma", device: "mlx5-8-p1-shared", shareID: share}, macvlanNode,
			`{"routes":[{"destination":"default","gateway":"192.168.77.1"}]}`, `network.routes[0]: Forbidden: routes are not allowed`},
		{"ipam node on a class without pools", alloc{request: "rdma", device: "mlx5-8-p1-shared", shareID: share},
			`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan"}}`, `{"ipam":"node"}`,
			`network.ipam: Forbidden: node is not allowed: the DeviceClass's allowedNetwork.addressPools names no address pool`},
		{"ipam node from the class, no pool allowed", alloc{request: "rdma", device: "mlx5-8-p1-shared", shareID: share},
			`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan","ipam":"node"}}`, `{}`,
			`ipam: node, but the DeviceClass allows no address pool (allowedNetwork.addressPools)`},
		{"a P_Key not listed", alloc{request: "rdma", device: "mlx5-0-p1"}, openClass, `{"mode":"ipoib","pkey":"0x8002"}`,
			`network.pkey: Forbidden: "0x8002" is not one of the DeviceClass's allowedNetwork.pkeys ["0x8001"]`},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var configs []resourceapi.DeviceAllocationConfiguration
			if tc.class != "" {
				configs = append(configs, opaque(resourceapi.AllocationConfigSourceClass, tc.class))
			}
			configs = append(configs, opaque(resourceapi.AllocationConfigSourceClaim, cfg+tc.network+`}`))
			claim := h.reservedFor(h.claim("refused"+string(rune('a'+i)), []alloc{tc.device}, configs...), "pod-refused")
			res := prepareOne(t, d, claim)
			if res.Err == nil || !strings.Contains(res.Err.Error(), tc.want) {
				t.Fatalf("prepare error %v, want it to contain %q", res.Err, tc.want)
			}
			if _, ok := h.checkpointClaims()[string(claim.UID)]; ok {
				t.Errorf("the refused claim has a checkpoint entry")
			}
		})
	}
	if got := h.checkpointClaims(); len(got) != len(before) || got[string(running.UID)] != before[string(running.UID)] {
		t.Errorf("checkpoint after the refused claims: %v, want %v", got, before)
	}
	if got := files(t, h.cdiDir); strings.Join(got, ",") != strings.Join(specsBefore, ",") {
		t.Errorf("CDI specs after the refused claims: %v, want %v", got, specsBefore)
	}
	if calls := f.callList(); len(calls) != 1 || calls[0] != "attach pod-running rdma0" {
		t.Errorf("attacher calls %v, want only the running pod's attach", calls)
	}
}

// TestStaticAddressReservedClusterWide: a static address is reserved cluster-wide when
// its claim is prepared (one Lease per address) and released at unprepare; a claim that
// asks for an address another claim holds, here on another node, is refused at prepare
// with the holder, and nothing of it is written. Without a namespace for the
// reservations static addresses are refused.
func TestStaticAddressReservedClusterWide(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	f := newFakeAttacher()
	d := h.networkDriver(f)
	static := func(addr string) string {
		return `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"macvlan","addresses":["` + addr + `"]}}`
	}
	a := h.reservedFor(h.claim("a", []alloc{{request: "rdma", device: "mlx5-8-p1"}},
		opaque(resourceapi.AllocationConfigSourceClass, openClass), opaque(resourceapi.AllocationConfigSourceClaim, static("192.168.77.5/24"))), "pod-a")
	if res := prepareOne(t, d, a); res.Err != nil {
		t.Fatal(res.Err)
	}
	leases := h.kube.CoordinationV1().Leases("rdma-dra-driver")
	name := addrlease.LeaseName(netip.MustParseAddr("192.168.77.5"))
	l, err := leases.Get(h.ctx, name, metav1.GetOptions{})
	if err != nil || *l.Spec.HolderIdentity != string(a.UID) {
		t.Fatalf("lease of a's address: %+v, %v", l, err)
	}

	// Another node's plugin holds .6 for a live claim.
	other := h.claim("other", []alloc{{request: "rdma", device: "mlx5-9-p1"}})
	remote := &addrlease.Reserver{Kube: h.kube, Namespace: "rdma-dra-driver", Node: "node-2"}
	if err := remote.Reserve(h.ctx, netip.MustParseAddr("192.168.77.6"), addrlease.Claim{UID: other.UID, Namespace: other.Namespace, Name: other.Name}); err != nil {
		t.Fatal(err)
	}
	b := h.reservedFor(h.claim("b", []alloc{{request: "rdma", device: "mlx5-9-p1"}},
		opaque(resourceapi.AllocationConfigSourceClass, openClass), opaque(resourceapi.AllocationConfigSourceClaim, static("192.168.77.6/24"))), "pod-b")
	res := prepareOne(t, d, b)
	if want := "static address 192.168.77.6: the address is held by another claim ns/other on node node-2"; res.Err == nil || !strings.Contains(res.Err.Error(), want) {
		t.Fatalf("prepare of b: %v, want %q", res.Err, want)
	}
	if _, ok := h.checkpointClaims()[string(b.UID)]; ok {
		t.Errorf("the refused claim b has a checkpoint entry")
	}

	unprepareOne(t, d, a)
	if _, err := leases.Get(h.ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("lease of a's address after unprepare: %v, want gone", err)
	}

	// A plugin without a namespace for the reservations refuses static addresses.
	// The same node, started without one.
	noReservations := h.networkOptions(f, "")
	noReservations.Addresses = nil
	d = h.startNetworkDriver(testDriver, newTestSpecs(h, ""), noReservations)
	c := h.reservedFor(h.claim("c", []alloc{{request: "rdma", device: "mlx5-8-p1"}},
		opaque(resourceapi.AllocationConfigSourceClass, openClass), opaque(resourceapi.AllocationConfigSourceClaim, static("192.168.77.7/24"))), "pod-c")
	if res := prepareOne(t, d, c); res.Err == nil || !strings.Contains(res.Err.Error(), "static addresses need the plugin's namespace") {
		t.Errorf("prepare without reservations: %v", res.Err)
	}
}

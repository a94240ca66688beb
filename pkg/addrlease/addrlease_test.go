package addrlease

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

const ns = "rdma-dra-driver"

func liveClaim(namespace, name string, uid types.UID) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

// TestReserveAcrossNodes: one address is held by one claim at a time, whatever node
// asks; the holder's reservation is idempotent and its release frees the address; a
// gone claim's address is taken over by its own node only.
func TestReserveAcrossNodes(t *testing.T) {
	ctx := context.Background()
	kube := fake.NewClientset(liveClaim("team-a", "a", "uid-a"), liveClaim("team-b", "b", "uid-b"))
	nodeA := &Reserver{Kube: kube, Namespace: ns, Node: "node-a"}
	nodeB := &Reserver{Kube: kube, Namespace: ns, Node: "node-b"}
	addr := netip.MustParseAddr("10.200.0.7")
	a := Claim{UID: "uid-a", Namespace: "team-a", Name: "a"}
	b := Claim{UID: "uid-b", Namespace: "team-b", Name: "b"}

	if err := nodeA.Reserve(ctx, addr, a); err != nil {
		t.Fatal(err)
	}
	if err := nodeA.Reserve(ctx, addr, a); err != nil {
		t.Fatalf("again for the holder: %v", err)
	}
	for _, tc := range []struct {
		name string
		r    *Reserver
	}{{"another node", nodeB}, {"the same node", nodeA}} {
		err := tc.r.Reserve(ctx, addr, b)
		if !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "static address 10.200.0.7: the address is held by another claim team-a/a on node node-a") {
			t.Errorf("%s: %v, want the address held by team-a/a on node-a", tc.name, err)
		}
	}
	// Another claim's release leaves it.
	if err := nodeB.Release(ctx, addr, b.UID); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Reserve(ctx, addr, b); !errors.Is(err, ErrHeld) {
		t.Errorf("after a stranger's release: %v, want held", err)
	}
	// The holder's release frees it for another node.
	if err := nodeA.Release(ctx, addr, a.UID); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Reserve(ctx, addr, b); err != nil {
		t.Fatalf("after the holder's release: %v", err)
	}

	// A gone claim: its node takes the address over, another node does not.
	v6 := netip.MustParseAddr("fd00:77::11")
	gone := Claim{UID: "uid-gone", Namespace: "team-a", Name: "gone"}
	if err := nodeA.Reserve(ctx, v6, gone); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Reserve(ctx, v6, b); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "which is gone") {
		t.Errorf("another node over a gone claim's address: %v, want held and gone", err)
	}
	if err := nodeA.Reserve(ctx, v6, a); err != nil {
		t.Errorf("its own node over a gone claim's address: %v", err)
	}
	l, err := kube.CoordinationV1().Leases(ns).Get(ctx, LeaseName(v6), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != "uid-a" || l.Annotations[AnnotationClaim] != "team-a/a" || l.Annotations[AnnotationAddress] != "fd00:77::11" {
		t.Errorf("taken-over lease %+v", l)
	}
	// A claim of the same name but another UID is another claim: the old one is gone.
	stale := Claim{UID: "uid-old-b", Namespace: "team-b", Name: "b"}
	addr2 := netip.MustParseAddr("10.200.0.8")
	if err := nodeB.Reserve(ctx, addr2, stale); err != nil {
		t.Fatal(err)
	}
	if err := nodeB.Reserve(ctx, addr2, b); err != nil {
		t.Errorf("over a claim recreated under the same name: %v", err)
	}
}

// TestLeaseName: names are valid object names, one per address, an IPv4-mapped IPv6
// address the same as its IPv4 one.
func TestLeaseName(t *testing.T) {
	for _, tc := range []struct{ addr, want string }{
		{"10.200.0.7", "rdma-addr-0ac80007"},
		{"::ffff:10.200.0.7", "rdma-addr-0ac80007"},
		{"fd00:77::11", "rdma-addr-fd000077000000000000000000000011"},
	} {
		if got := LeaseName(netip.MustParseAddr(tc.addr)); got != tc.want {
			t.Errorf("LeaseName(%s) = %s, want %s", tc.addr, got, tc.want)
		}
	}
}

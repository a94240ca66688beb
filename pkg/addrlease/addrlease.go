// Package addrlease reserves the static addresses of pod interfaces cluster-wide, so that
// no two claims hold one address on two nodes: each address is one coordination.k8s.io
// Lease in the driver's namespace, named after the address. The API server creates an
// object of a name at most once, so of two plugins that reserve one address at the same
// time exactly one succeeds, whatever nodes they run on; the other is refused with the
// holder's claim and node.
//
// A Lease names its holder (the claim's UID in spec.holderIdentity), the claim and the
// node (annotations; node names can be longer than a label value). The node's plugin releases its Leases when it
// unprepares the claim. A Lease whose claim is gone is taken over, by the plugin of the
// node that holds it only: the chart's admission policy lets a plugin write the Leases of
// its own node and no other, so a plugin can neither free nor steal another node's
// address. The Leases of a node that never comes back are deleted by the admin
// (docs/security.md lists them with their nodes).
package addrlease

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Labels and annotations of an address Lease.
const (
	// LabelAddress marks a Lease as a static address reservation of the driver.
	LabelAddress = "rdma.dra.io/static-address"
	// AnnotationNode is the node whose plugin holds the address.
	AnnotationNode = "rdma.dra.io/node"
	// AnnotationClaim is namespace/name of the claim that holds the address.
	AnnotationClaim = "rdma.dra.io/claim"
	// AnnotationAddress is the address as text.
	AnnotationAddress = "rdma.dra.io/address"
)

// Reserver reserves addresses for the claims of one node.
type Reserver struct {
	// Kube reads claims and writes Leases.
	Kube kubernetes.Interface
	// Namespace holds the Leases: the driver's own.
	Namespace string
	// Node is this plugin's node.
	Node string
}

// Claim identifies the claim an address is reserved for.
type Claim struct {
	UID             types.UID
	Namespace, Name string
}

// ErrHeld is returned (wrapped, with the holder) for an address another live claim
// holds.
var ErrHeld = errors.New("the address is held by another claim")

// LeaseName returns the Lease name of an address: rdma-addr- and the address's 4 or 16
// bytes in hex, a valid object name for every address that no two addresses share.
func LeaseName(a netip.Addr) string {
	return "rdma-addr-" + hex.EncodeToString(a.Unmap().AsSlice())
}

// Reserve reserves a for claim. It is idempotent for the claim that holds a, takes over
// a Lease of this node whose claim is gone, and refuses, wrapping ErrHeld, an address
// that another claim holds (on any node) or that a gone claim of another node still
// holds.
func (r *Reserver) Reserve(ctx context.Context, a netip.Addr, claim Claim) error {
	leases := r.Kube.CoordinationV1().Leases(r.Namespace)
	want := r.lease(a, claim)
	_, err := leases.Create(ctx, want, metav1.CreateOptions{})
	if err == nil || !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("reserve address %s: %w", a, err)
		}
		return nil
	}
	have, err := leases.Get(ctx, want.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reserve address %s: read its Lease: %w", a, err)
	}
	holder := ""
	if have.Spec.HolderIdentity != nil {
		holder = *have.Spec.HolderIdentity
	}
	if holder == string(claim.UID) {
		return nil
	}
	node := have.Annotations[AnnotationNode]
	ref := have.Annotations[AnnotationClaim]
	live, err := r.claimExists(ctx, ref, holder)
	if err != nil {
		return fmt.Errorf("reserve address %s: %w", a, err)
	}
	if live || node != r.Node {
		gone := ""
		if !live {
			gone = ", which is gone; the plugin of that node releases it, or the admin deletes Lease " + r.Namespace + "/" + want.Name
		}
		return fmt.Errorf("static address %s: %w %s on node %s%s", a, ErrHeld, ref, node, gone)
	}
	klog.FromContext(ctx).V(2).Info("Taking over the static address of a gone claim", "address", a, "claim", ref, "newClaim", klog.KRef(claim.Namespace, claim.Name))
	want.ResourceVersion = have.ResourceVersion
	if _, err := leases.Update(ctx, want, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("reserve address %s: take over the Lease of gone claim %s: %w", a, ref, err)
	}
	return nil
}

// Release gives a up if claim holds it; an address held by another claim, or not at
// all, is left alone.
func (r *Reserver) Release(ctx context.Context, a netip.Addr, claim types.UID) error {
	leases := r.Kube.CoordinationV1().Leases(r.Namespace)
	name := LeaseName(a)
	have, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release address %s: %w", a, err)
	}
	if have.Spec.HolderIdentity == nil || *have.Spec.HolderIdentity != string(claim) {
		return nil
	}
	// The preconditions keep a Lease that was taken over in between.
	err = leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &have.UID, ResourceVersion: &have.ResourceVersion}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("release address %s: %w", a, err)
	}
	return nil
}

// claimExists reports whether the claim ref (namespace/name) still exists with UID uid.
func (r *Reserver) claimExists(ctx context.Context, ref, uid string) (bool, error) {
	ns, name, ok := strings.Cut(ref, "/")
	if !ok || ns == "" || name == "" || uid == "" {
		return false, nil
	}
	c, err := r.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read claim %s that holds the address: %w", ref, err)
	}
	return string(c.UID) == uid, nil
}

func (r *Reserver) lease(a netip.Addr, claim Claim) *coordinationv1.Lease {
	holder := string(claim.UID)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: LeaseName(a), Namespace: r.Namespace,
			Labels:      map[string]string{LabelAddress: "true"},
			Annotations: map[string]string{AnnotationNode: r.Node, AnnotationClaim: claim.Namespace + "/" + claim.Name, AnnotationAddress: a.String()},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}
}

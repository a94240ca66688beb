package podnet

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"net/netip"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// The claims' network records (checkpoint.Network) as the pod network reads them, and
// the static addresses of claims.

// addressPool returns the address pool that serves the device's pod addresses on node:
// among the pools the class allows, or, for a record without policy, the first that
// selects the port.
func addressPool(nd *checkpoint.NetworkDevice, pools *nodeconfig.Config, node string, port *discovery.Port) (nodeconfig.Range, bool) {
	if nd.Policy == nil {
		return pools.PoolFor(node, port)
	}
	return pools.AllowedPoolFor(node, port, nd.Policy.AddressPools)
}

// networks yields the entries of cp that have a network record, with the record.
func networks(cp *checkpoint.Checkpoint) iter.Seq2[*checkpoint.Claim, *checkpoint.Network] {
	return func(yield func(*checkpoint.Claim, *checkpoint.Network) bool) {
		for _, entry := range cp.Claims {
			if entry.Network == nil {
				continue
			}
			if !yield(entry, entry.Network) {
				return
			}
		}
	}
}

// networkOf returns the network record of a checkpoint entry; nil when it has none.
func networkOf(entry *checkpoint.Claim) *checkpoint.Network {
	if entry == nil {
		return nil
	}
	return entry.Network
}

// ReservedPods returns the UIDs of the pods a claim is reserved for, sorted.
func ReservedPods(claim *resourceapi.ResourceClaim) []string {
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" && r.UID != "" {
			pods = append(pods, string(r.UID))
		}
	}
	slices.Sort(pods)
	return slices.Compact(pods)
}

// staticPrefixes parses validated static addresses.
func staticPrefixes(addrs []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		p, err := v1alpha1.ParseInterfaceAddress(a)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", a, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// CheckStaticAddresses refuses static addresses that an address pool of the node
// configuration may hand out, on this node or another (the chart gives every node the
// same pools, so this node sees the cluster's address plan): a static address there
// would sooner or later be a second pod's address too.
func (p *Network) CheckStaticAddresses(addrs []string) error {
	if p.pools == nil {
		return nil
	}
	for _, a := range addrs {
		pfx, err := v1alpha1.ParseInterfaceAddress(a)
		if err != nil {
			return fmt.Errorf("static address %q: %w", a, err)
		}
		if pool, ok := p.pools.PoolContaining(pfx.Addr()); ok {
			return fmt.Errorf("static address %s lies in the range of address pool %s of the node configuration, which hands its addresses out to pods itself", a, pool)
		}
	}
	return nil
}

// staticAddresses returns the static addresses an entry's network record asks for.
func staticAddresses(entry *checkpoint.Claim) ([]netip.Addr, error) {
	n := networkOf(entry)
	if n == nil {
		return nil, nil
	}
	var out []netip.Addr
	for _, nd := range n.Devices {
		pfxs, err := staticPrefixes(nd.Config.Addresses)
		if err != nil {
			return nil, err
		}
		for _, p := range pfxs {
			out = append(out, p.Addr())
		}
	}
	return out, nil
}

// ReserveAddresses reserves the static addresses of a planned entry cluster-wide before
// anything of the claim is written, so that no pod on another node holds one of them
// (pkg/addrlease). Claims without static addresses cost nothing here.
func (p *Network) ReserveAddresses(ctx context.Context, claim *resourceapi.ResourceClaim, entry *checkpoint.Claim) error {
	addrs, err := staticAddresses(entry)
	if err != nil || len(addrs) == 0 {
		return err
	}
	if p == nil || p.addresses == nil {
		return errors.New("static addresses need the plugin's namespace (--namespace), where their cluster-wide reservations are kept: without it no other node would know them")
	}
	for _, a := range addrs {
		if err := p.addresses.Reserve(ctx, a, addrlease.Claim{UID: claim.UID, Namespace: claim.Namespace, Name: claim.Name}); err != nil {
			return err
		}
	}
	return nil
}

// ReleaseAddresses gives up the static addresses of an unprepared entry. A failure is
// logged: the reservation of a gone claim is taken over by the next claim of this node
// that asks for the address.
func (p *Network) ReleaseAddresses(ctx context.Context, entry *checkpoint.Claim) {
	if p == nil || p.addresses == nil {
		return
	}
	addrs, err := staticAddresses(entry)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Could not read the static addresses of an unprepared claim", "claim", klog.KRef(entry.Namespace, entry.Name))
		return
	}
	for _, a := range addrs {
		if err := p.addresses.Release(ctx, a, types.UID(entry.UID)); err != nil {
			klog.FromContext(ctx).Error(err, "Could not release a static address", "claim", klog.KRef(entry.Namespace, entry.Name), "address", a)
		}
	}
}

// AddressPool returns the address pool that serves nd's pod addresses on this node for
// port: among the pools the device's class allows, or, for a record without policy, the
// first that selects the port.
func (p *Network) AddressPool(nd *checkpoint.NetworkDevice, port *discovery.Port) (nodeconfig.Range, bool) {
	return addressPool(nd, p.pools, p.nodeName, port)
}

package plugin

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
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

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

// reservedPods returns the UIDs of the pods a claim is reserved for, sorted.
func reservedPods(claim *resourceapi.ResourceClaim) []string {
	var pods []string
	for _, r := range claim.Status.ReservedFor {
		if r.Resource == "pods" && r.APIGroup == "" && r.UID != "" {
			pods = append(pods, string(r.UID))
		}
	}
	slices.Sort(pods)
	return slices.Compact(pods)
}

// errNoNetworkAttachment is the prepare error of a claim that asks for attachment on a
// plugin that cannot attach.
var errNoNetworkAttachment = errors.New("network attachment is not available on this node")

// planNetwork checks the merged config of one allocated device against the device and
// the node and returns what to record, or nil when nothing is attached. netnsExclusive
// is the node's RDMA netns mode.
func (d *Driver) planNetwork(r resourceapi.DeviceRequestAllocationResult, shareID string, dev devicemodel.Device, cfg *v1alpha1.RdmaConfig, netnsExclusive bool) (*checkpoint.NetworkDevice, error) {
	net := cfg.Network
	mode := v1alpha1.NetworkModeNone
	if net != nil && net.Mode != nil {
		mode = *net.Mode
	}
	if !mode.Attaches() && !netnsExclusive {
		return nil, nil
	}
	if dev.Mode == devicemodel.ModeLegacy && mode.Attaches() {
		// The model publishes no legacy device in exclusive RDMA netns mode.
		return nil, fmt.Errorf("request %q: device %s stands for %d ports of legacy resource and network mode %s attaches one port's netdev: a legacy device attaches no network (claim ports of another pool for that)",
			r.Request, r.Device, len(dev.AllPorts()), mode)
	}
	if d.net == nil {
		if netnsExclusive {
			return nil, fmt.Errorf("request %q: device %s: the node's RDMA subsystem is in exclusive network namespace mode, where a pod sees an RDMA device only when the plugin moves it into the pod, and %w: %s",
				r.Request, r.Device, errNoNetworkAttachment, d.netUnavailable())
		}
		return nil, fmt.Errorf("request %q: device %s asks for network mode %s, but %w: %s", r.Request, r.Device, mode, errNoNetworkAttachment, d.netUnavailable())
	}
	if err := d.net.ready(); err != nil {
		return nil, fmt.Errorf("request %q: device %s asks for network mode %s, but %w: %w", r.Request, r.Device, mode, errNoNetworkAttachment, err)
	}
	port := dev.Port
	exclusive := dev.Mode == devicemodel.ModeExclusive
	fail := func(format string, args ...any) error {
		return fmt.Errorf("request %q: device %s (%s port %d): network mode %s: %s", r.Request, r.Device, port.IBDev, port.Port, mode, fmt.Sprintf(format, args...))
	}
	if netnsExclusive && !exclusive {
		return nil, fail("the node's RDMA subsystem is in exclusive network namespace mode, where an RDMA device can be in one pod only: claim the whole port")
	}
	switch mode {
	case v1alpha1.NetworkModeMacvlan, v1alpha1.NetworkModeIPVlan:
		if port.LinkLayer != discovery.LinkLayerEthernet {
			return nil, fail("needs an Ethernet (RoCE) port, this one is %s: use ipoib for InfiniBand", port.LinkLayer)
		}
	case v1alpha1.NetworkModeMove:
		if !exclusive {
			return nil, fail("moves the port's netdev into one pod and needs the whole port: use macvlan or ipvlan for shares")
		}
	case v1alpha1.NetworkModeIPoIB:
		if port.LinkLayer != discovery.LinkLayerInfiniBand {
			return nil, fail("needs an InfiniBand port, this one is %s: use macvlan or ipvlan for RoCE", port.LinkLayer)
		}
	}
	if mode.Attaches() && port.Netdev == "" {
		return nil, fail("the port has no netdev on this node")
	}
	nd := &checkpoint.NetworkDevice{
		Request: r.Request, Pool: r.Pool, Device: r.Device, ShareID: shareID,
		IBDev: port.IBDev, Port: port.Port, LinkLayer: port.LinkLayer, Netdev: port.Netdev,
		GIDPolicy: *cfg.GIDIndex, MoveRDMA: netnsExclusive, Policy: &checkpoint.NetworkPolicy{},
	}
	if p := cfg.AllowedNetwork; p != nil {
		nd.Policy.AddressPools = slices.Clone(p.AddressPools)
	}
	if mode.Attaches() && len(net.Addresses) == 0 && *net.IPAM == v1alpha1.IPAMNode {
		if _, ok := addressPool(nd, d.net.pools, d.nodeName, &port); !ok {
			if len(nd.Policy.AddressPools) == 0 {
				return nil, fail("ipam: node, but the DeviceClass allows no address pool (allowedNetwork.addressPools)")
			}
			return nil, fail("ipam: node, but none of the address pools the DeviceClass allows (allowedNetwork.addressPools %v) selects this port on this node", nd.Policy.AddressPools)
		}
	}
	if mode.Attaches() {
		if err := d.net.checkStaticAddresses(net.Addresses); err != nil {
			return nil, fail("%v", err)
		}
	}
	if port.Verbs != nil {
		nd.UVerbs = "/dev/infiniband/" + port.Verbs.Name
	}
	if net != nil {
		nd.Config = *net.DeepCopy()
	}
	if nd.Config.Mode == nil {
		nd.Config.Mode = &mode
	}
	return nd, nil
}

// checkStaticAddresses refuses a claim where one list of static addresses would go to
// two devices: each pod interface needs its own address.
func checkStaticAddresses(devices []checkpoint.NetworkDevice) error {
	seen := map[string]string{}
	for _, nd := range devices {
		for _, a := range nd.Config.Addresses {
			if other, ok := seen[a]; ok {
				return fmt.Errorf("static address %s of request %q would go to devices %s and %s: static addresses apply to one device, use ipam: node for requests of several devices", a, nd.Request, other, nd.Device)
			}
			seen[a] = nd.Device
		}
	}
	return nil
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

// addPods records the pods that planned (a prepare of an already prepared claim) is
// reserved for in existing's network record, and reports whether any was new.
func addPods(existing, planned *checkpoint.Claim) bool {
	have, want := networkOf(existing), networkOf(planned)
	if have == nil || want == nil {
		return false
	}
	return have.MergePods(want.Pods)
}

// keepAttachments carries the attachments and pods of an entry that is prepared again
// (an interrupted or reallocated preparation) into the planned entry: they are state
// of the node that only a detach may end. Attachments of devices the claim no longer
// has are kept as devices of their own, so that the claim's unprepare detaches them.
func keepAttachments(existing, planned *checkpoint.Claim) {
	// A copy: the devices carried over must share nothing with the existing entry.
	have := networkOf(existing).DeepCopy()
	if have == nil {
		return
	}
	want := networkOf(planned)
	if want == nil {
		want = &checkpoint.Network{}
	}
	want.MergePods(have.Pods)
	for _, old := range have.Devices {
		if len(old.Attachments) == 0 {
			continue
		}
		i := slices.IndexFunc(want.Devices, func(nd checkpoint.NetworkDevice) bool {
			return nd.Device == old.Device && nd.ShareID == old.ShareID
		})
		if i < 0 {
			old.Stale = true
			want.Devices = append(want.Devices, old)
			continue
		}
		want.Devices[i].Attachments = append(want.Devices[i].Attachments, old.Attachments...)
	}
	planned.SetNetwork(want)
}

// checkStaticAddresses refuses static addresses that an address pool of the node
// configuration may hand out, on this node or another (the chart gives every node the
// same pools, so this node sees the cluster's address plan): a static address there
// would sooner or later be a second pod's address too.
func (p *podNetwork) checkStaticAddresses(addrs []string) error {
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

// reserveAddresses reserves the static addresses of a planned entry cluster-wide before
// anything of the claim is written, so that no pod on another node holds one of them
// (pkg/addrlease). Claims without static addresses cost nothing here.
func (p *podNetwork) reserveAddresses(ctx context.Context, claim *resourceapi.ResourceClaim, entry *checkpoint.Claim) error {
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

// releaseAddresses gives up the static addresses of an unprepared entry. A failure is
// logged: the reservation of a gone claim is taken over by the next claim of this node
// that asks for the address.
func (p *podNetwork) releaseAddresses(ctx context.Context, entry *checkpoint.Claim) {
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

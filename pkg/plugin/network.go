package plugin

import (
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

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
	if err := d.net.Ready(); err != nil {
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
		if _, ok := d.net.AddressPool(nd, &port); !ok {
			if len(nd.Policy.AddressPools) == 0 {
				return nil, fail("ipam: node, but the DeviceClass allows no address pool (allowedNetwork.addressPools)")
			}
			return nil, fail("ipam: node, but none of the address pools the DeviceClass allows (allowedNetwork.addressPools %v) selects this port on this node", nd.Policy.AddressPools)
		}
	}
	if mode.Attaches() {
		if err := d.net.CheckStaticAddresses(net.Addresses); err != nil {
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

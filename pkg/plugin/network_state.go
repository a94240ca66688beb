package plugin

import (
	"context"
	"slices"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// NetworkOptions enable network attachment into pods.
type NetworkOptions struct {
	// Attacher makes and undoes attachments: the node guard (podnet.NewNodeGuard)
	// around a *netattach.Attacher.
	Attacher podnet.Attacher
	// Pools holds the node configuration's address pools.
	Pools *nodeconfig.Config
	// Socket is the runtime's NRI socket.
	Socket string
	// MarkDir is where the attachment marks are kept (pkg/attachmark), which the CDI
	// specs' hook waits for; empty keeps none.
	MarkDir string
	// Addresses reserves static pod addresses cluster-wide (pkg/addrlease); nil refuses
	// static addresses, since no other node would know them.
	Addresses *addrlease.Reserver
}

// newPodNetwork is the driver's pod network of opts (pkg/podnet), which reaches the
// driver's checkpoint and claim locks through the options and tells it of attachments
// through podNetworkChanged.
func (d *Driver) newPodNetwork(opts *NetworkOptions) *podnet.Network {
	return podnet.New(podnet.Options{
		Attacher: opts.Attacher, Pools: opts.Pools, Socket: opts.Socket, MarkDir: opts.MarkDir, Addresses: opts.Addresses,
		DriverName: d.driverName, NodeName: d.nodeName,
		Update: d.update,
		LockClaims: func(ctx context.Context, uids []string) (func(), error) {
			held, err := d.claims.lock(ctx, uids)
			if err != nil {
				return nil, err
			}
			return func() { held.release(nil) }, nil
		},
		Changed: d.podNetworkChanged,
		Devices: d.devices,
		Specs:   d.specs,
		Kube:    d.kube,
		Metrics: d.metrics,
	})
}

// podNetworkChanged follows a claim's attachments into a pod: its status when something
// was attached, its device metadata once everything is.
func (d *Driver) podNetworkChanged(ctx context.Context, uid string, change podnet.Change) {
	switch change {
	case podnet.Attached:
		d.reportNetwork(ctx, uid)
	case podnet.Ready:
		d.updateMetadata(ctx, uid)
	}
}

// NetworkAttachment returns the driver's pod network (its NRI side); nil when network
// attachment is off.
func (d *Driver) NetworkAttachment() *podnet.Network { return d.net }

// netUnavailable says why the driver has no network attachment at all.
func (d *Driver) netUnavailable() string {
	if d.netOffReason != "" {
		return d.netOffReason
	}
	return "the plugin runs with --network-attachment=false"
}

// networkOf returns the network record of a checkpoint entry; nil when it has none.
func networkOf(entry *checkpoint.Claim) *checkpoint.Network {
	if entry == nil {
		return nil
	}
	return entry.Network
}

// reportNetwork writes what the pods got into the claim's status.devices[].networkData:
// for each attached device, the attachment of the claim's first pod (a claim shared
// by several pods has one status per device, not per pod).
func (d *Driver) reportNetwork(ctx context.Context, uid string) {
	var ref claimstatus.ClaimRef
	var net *checkpoint.Network
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		entry := cp.Claims[uid]
		if entry == nil {
			return false, nil
		}
		ref = claimstatus.ClaimRef{Namespace: entry.Namespace, Name: entry.Name, UID: types.UID(uid)}
		net = networkOf(entry).DeepCopy()
		return false, nil
	})
	if err != nil || net == nil {
		if err != nil {
			klog.FromContext(ctx).Error(err, "Read network record for the claim status", "claimUID", uid)
		}
		return
	}
	ref.Generation = net.Generation
	d.status.Update(ref, func(current []claimstatus.DeviceStatus) []claimstatus.DeviceStatus {
		for _, nd := range net.Devices {
			var data *claimstatus.NetworkDeviceData
			for _, a := range nd.Attachments {
				if a.State.Phase == netattach.PhaseAttached && a.State.Spec.PodIfName != "" {
					data = &claimstatus.NetworkDeviceData{InterfaceName: a.State.Spec.PodIfName, HardwareAddress: a.State.HardwareAddr}
					for _, p := range a.State.PodAddresses {
						data.IPs = append(data.IPs, p.String())
					}
					break
				}
			}
			i := slices.IndexFunc(current, func(ds claimstatus.DeviceStatus) bool {
				return ds.Pool == nd.Pool && ds.Device == nd.Device && ds.ShareID == nd.ShareID
			})
			if i < 0 {
				// The network record keeps what the status needs of the port but its GID index.
				port := discovery.Port{IBDev: nd.IBDev, Port: nd.Port, LinkLayer: nd.LinkLayer, Netdev: nd.Netdev}
				current = append(current, claimstatus.DeviceStatus{Pool: nd.Pool, Device: nd.Device, ShareID: nd.ShareID,
					Data: newDeviceData(&port, nd.UVerbs)})
				i = len(current) - 1
			}
			current[i].Network = data
		}
		return current
	})
}

// attachedEntries returns copies of the entries among uids that still have
// attachments. Without network attachment there are none to undo.
func (d *Driver) attachedEntries(ctx context.Context, uids []string) (map[string]*checkpoint.Claim, error) {
	if d.net == nil {
		return nil, nil
	}
	out := map[string]*checkpoint.Claim{}
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		clear(out)
		for _, uid := range uids {
			n := networkOf(cp.Claims[uid])
			if n == nil {
				continue
			}
			for _, nd := range n.Devices {
				if len(nd.Attachments) > 0 {
					out[uid] = cp.Claims[uid].Clone()
					break
				}
			}
		}
		return false, nil
	})
	return out, err
}

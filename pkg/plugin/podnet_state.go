package plugin

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// containerEnv is sandboxEnv for the attachments of pod in any of its sandboxes.
func (p *podNetwork) containerEnv(ctx context.Context, pod string, devices []string) (map[string]string, error) {
	return p.sandboxEnv(ctx, pod, "", devices)
}

// sandboxEnv returns the environment a container of pod gets from its attachments:
// NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX (the GID index of the pod's own address, where
// every attached RoCE device of the container agrees and the claim's gidIndex policy is
// auto) and NCCL_SOCKET_IFNAME (where a device asks for it). devices are the
// container's device node paths; nil means unknown, and then every attachment of the
// pod counts. netnsPath is the network namespace of the container's sandbox: an
// attachment into another (earlier) sandbox of the pod counts as missing; empty takes
// any.
func (p *podNetwork) sandboxEnv(ctx context.Context, pod, netnsPath string, devices []string) (map[string]string, error) {
	type found struct {
		gid    *int
		policy v1alpha1.GIDIndexPolicy
		ifname string
		socket bool
	}
	var all []found
	missing := false
	err := p.d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		all, missing = all[:0], false
		for _, n := range networks(cp) {
			for _, nd := range n.Devices {
				if devices != nil && nd.UVerbs != "" && !slices.Contains(devices, nd.UVerbs) {
					continue
				}
				a := nd.Attachment(pod)
				if a == nil || a.State.Phase != netattach.PhaseAttached || (netnsPath != "" && a.State.Target.NetnsPath != netnsPath) {
					if n.HasPod(pod) {
						missing = true
					}
					continue
				}
				f := found{gid: a.State.GIDIndex, policy: nd.GIDPolicy, ifname: a.State.Spec.PodIfName}
				f.socket = nd.Config.SocketInterface != nil && *nd.Config.SocketInterface
				all = append(all, f)
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCheckpointUnreadable, err)
	}
	if missing {
		return nil, errAttachmentMissing
	}
	env := map[string]string{}
	var gids []int
	agree := true
	var socketIfs []string
	for _, f := range all {
		if f.policy == v1alpha1.GIDIndexAuto && f.gid != nil {
			gids = append(gids, *f.gid)
			if gids[0] != *f.gid {
				agree = false
			}
		}
		if f.socket && f.ifname != "" {
			socketIfs = append(socketIfs, f.ifname)
		}
	}
	switch {
	case len(gids) > 0 && agree:
		v := strconv.Itoa(gids[0])
		env["NCCL_IB_GID_INDEX"], env["UCX_IB_GID_INDEX"] = v, v
	case len(gids) > 0:
		klog.FromContext(ctx).Info("The pod's RoCE devices have different GID indices for their addresses; NCCL_IB_GID_INDEX is not set (NCCL takes one value per process)", "podUID", pod, "gidIndices", gids)
	}
	if len(socketIfs) > 0 {
		slices.Sort(socketIfs)
		env["NCCL_SOCKET_IFNAME"] = "=" + strings.Join(slices.Compact(socketIfs), ",")
	}
	return env, nil
}

// errAttachmentMissing says that a container's pod should have an attachment that is
// not (yet) there.
var errAttachmentMissing = errors.New("an attachment of the pod is missing")

// NetworkOptions enable network attachment into pods.
type NetworkOptions struct {
	// Attacher makes and undoes attachments; *netattach.Attacher implements it.
	Attacher Attacher
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

// NetworkAttachment returns the driver's NRI side; nil when network attachment is off.
func (d *Driver) NetworkAttachment() *podNetwork { return d.net }

// attachedPods returns the pods that have an attachment recorded, sorted.
func (p *podNetwork) attachedPods(ctx context.Context) ([]string, error) {
	var pods []string
	err := p.d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		pods = pods[:0]
		for _, n := range networks(cp) {
			for _, nd := range n.Devices {
				for _, a := range nd.Attachments {
					pods = append(pods, a.Pod)
				}
			}
		}
		return false, nil
	})
	slices.Sort(pods)
	return slices.Compact(pods), err
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

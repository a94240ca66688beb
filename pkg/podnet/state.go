package podnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// ContainerEnv is sandboxEnv for the attachments of pod in any of its sandboxes.
func (p *Network) ContainerEnv(ctx context.Context, pod string, devices []string) (map[string]string, error) {
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
func (p *Network) sandboxEnv(ctx context.Context, pod, netnsPath string, devices []string) (map[string]string, error) {
	type found struct {
		gid    *int
		policy v1alpha1.GIDIndexPolicy
		ifname string
		socket bool
	}
	var all []found
	missing := false
	err := p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
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

// attachedPods returns the pods that have an attachment recorded, sorted.
func (p *Network) attachedPods(ctx context.Context) ([]string, error) {
	var pods []string
	err := p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
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

package podnet

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/containerd/nri/pkg/api"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
)

// What the NRI side does when the checkpoint cannot be read.
//
// The runtime sends every pod and container of the node through this plugin, most of
// them without anything of this driver's. Failing them all because the plugin's own
// state cannot be read (a disk error, a checkpoint of a newer plugin after a rollback)
// would take the node down with the plugin. So the plugin fails open for what has
// nothing of this driver's and closed for what has or may have, and tells the two apart
// without the checkpoint (usesDriver).

// claimListPageSize is how many claims one list call of podClaimOfDriver asks for.
const claimListPageSize = 500

// errCheckpointUnreadable marks the failure to read the checkpoint where the NRI side
// looks up what a pod has of this driver's.
var errCheckpointUnreadable = errors.New("cannot read the plugin's checkpoint")

// unlessNotOurs returns err, except when err is that the checkpoint cannot be read and
// the pod (the container, when ctr is not nil) has nothing of this driver's: then the
// runtime goes on without the plugin, and that is logged.
func (p *Network) unlessNotOurs(ctx context.Context, pod *api.PodSandbox, ctr *api.Container, err error) error {
	if !errors.Is(err, errCheckpointUnreadable) {
		return err
	}
	ours, why := p.usesDriver(ctx, pod, ctr)
	if ours {
		return fmt.Errorf("%w (failing closed: %s)", err, why)
	}
	klog.FromContext(ctx).Info("Checkpoint unreadable, going on without network attachment for a pod that has nothing of this driver",
		"pod", podName(pod), "podUID", pod.GetUid(), "container", ctr.GetName(), "reason", why, "err", err)
	return nil
}

// usesDriver tells, without the checkpoint, whether the pod, or its container ctr when
// not nil, may have something of this driver's, and why. It asks, in this order:
//   - the container's CDI devices, where the runtime shows them (containerd 2.1 and
//     later): this driver's claims and metadata come as CDI devices of its own vendors;
//   - the node's CDI specs of this driver: without any, no claim is prepared here;
//   - the API: a claim in the pod's namespace reserved for the pod (status.reservedFor,
//     which the kubelet requires before it prepares) with a device of this driver.
//
// Whatever cannot be told counts as the driver's.
func (p *Network) usesDriver(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (bool, string) {
	if devs := ctr.GetCDIDevices(); len(devs) > 0 {
		for _, dev := range devs {
			if p.ownsCDIDevice(dev.GetName()) {
				return true, fmt.Sprintf("the container has CDI device %s of this driver", dev.GetName())
			}
		}
		return false, "none of the container's CDI devices is of this driver"
	}
	if specs, err := p.specs.List(); err == nil && len(specs) == 0 {
		return false, "no claim of this driver is prepared on this node"
	}
	claim, err := p.podClaimOfDriver(ctx, pod)
	switch {
	case err != nil:
		return true, fmt.Sprintf("cannot tell whether the pod has a claim of this driver: %v", err)
	case claim != "":
		return true, fmt.Sprintf("the pod's claim %s has a device of this driver", claim)
	}
	return false, "no claim reserved for the pod has a device of this driver"
}

// ownsCDIDevice reports whether the qualified CDI device name is of this driver: of its
// claims' specs (cdi.Vendor) or of the metadata specs the helper writes for it.
func (p *Network) ownsCDIDevice(name string) bool {
	return strings.HasPrefix(name, cdi.Vendor(p.driverName)+"/") || strings.HasPrefix(name, p.driverName+"/")
}

// podClaimOfDriver returns namespace/name of a claim that is reserved for pod and has a
// device of this driver, or "" when there is none. It reads the claims of the pod's
// namespace in pages of claimListPageSize.
func (p *Network) podClaimOfDriver(ctx context.Context, pod *api.PodSandbox) (string, error) {
	if pod.GetNamespace() == "" || pod.GetUid() == "" {
		return "", errors.New("the runtime names no namespace and UID of the pod")
	}
	opts := metav1.ListOptions{Limit: claimListPageSize}
	for {
		list, err := p.kube.ResourceV1().ResourceClaims(pod.GetNamespace()).List(ctx, opts)
		if err != nil {
			return "", fmt.Errorf("list the claims of namespace %s: %w", pod.GetNamespace(), err)
		}
		for i := range list.Items {
			claim := &list.Items[i]
			if !slices.Contains(ReservedPods(claim), pod.GetUid()) || claim.Status.Allocation == nil {
				continue
			}
			for _, r := range claim.Status.Allocation.Devices.Results {
				if r.Driver == p.driverName {
					return claim.Namespace + "/" + claim.Name, nil
				}
			}
		}
		if list.Continue == "" {
			return "", nil
		}
		opts.Continue = list.Continue
	}
}

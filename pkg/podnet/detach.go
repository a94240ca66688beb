package podnet

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// The teardown half of podnet.go: detaching a pod's attachments at StopPodSandbox or
// RemovePodSandbox, a claim's at unprepare, and the attachment marks.

// DetachPod detaches everything attached into pod, in any of its sandboxes.
func (p *Network) DetachPod(ctx context.Context, pod string) error {
	return p.detachSandbox(ctx, pod, "")
}

// detachSandbox detaches what is attached into the sandbox of pod whose network
// namespace is netnsPath; empty detaches from every sandbox of the pod. A pod has more
// than one sandbox when the runtime creates its sandbox again: the kubelet stops and
// removes the old one after the new one runs, and those events must leave the new
// sandbox's attachments alone.
func (p *Network) detachSandbox(ctx context.Context, pod, netnsPath string) error {
	logger := klog.FromContext(ctx).WithValues("podUID", pod)
	ctx = klog.NewContext(ctx, logger)
	work, release, err := p.lockPodClaims(ctx, pod)
	if err != nil || len(work) == 0 {
		return err
	}
	defer release()
	var errs []error
	// In reverse, so that interfaces go in the opposite order they came.
	for i := len(work) - 1; i >= 0; i-- {
		if err := p.detachOne(ctx, work[i], pod, netnsPath); err != nil && !errors.Is(err, errClaimGone) {
			errs = append(errs, fmt.Errorf("claim %s: %w", work[i].claim, err))
		}
	}
	return errors.Join(errs...)
}

// detachOne detaches one device from pod if it is attached there, in the sandbox whose
// network namespace is netnsPath (empty: in any).
func (p *Network) detachOne(ctx context.Context, w podWork, pod, netnsPath string) error {
	var st *netattach.State
	err := p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		st = nil
		return withDevice(cp, w, func(_ *checkpoint.Network, nd *checkpoint.NetworkDevice) (bool, error) {
			if a := nd.Attachment(pod); a != nil && (netnsPath == "" || a.State.Target.NetnsPath == netnsPath) {
				s := a.State
				st = &s
			}
			return false, nil
		})
	})
	if err != nil || st == nil {
		return err
	}
	return p.detachState(ctx, w, pod, *st)
}

// detachState undoes one recorded attachment and forgets it. The pod's mark goes first:
// no container of the pod starts against an attachment that is being undone.
func (p *Network) detachState(ctx context.Context, w podWork, pod string, st netattach.State) error {
	if err := p.unmark(pod, w.claimUID); err != nil {
		return err
	}
	if err := p.attacher.Detach(ctx, st, p.journal(ctx, w, pod)); err != nil {
		return fmt.Errorf("detach %s of device %s: %w", st.Spec.Mode, p.deviceName(w), err)
	}
	return p.forget(ctx, w, pod)
}

// forget removes the attachment record of a device in pod.
func (p *Network) forget(ctx context.Context, w podWork, pod string) error {
	return p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		changed, err := withDevice(cp, w, func(_ *checkpoint.Network, nd *checkpoint.NetworkDevice) (bool, error) {
			if nd.Attachment(pod) == nil {
				return false, nil
			}
			nd.DropAttachment(pod)
			return true, nil
		})
		if errors.Is(err, errClaimGone) {
			return false, nil
		}
		return changed, err
	})
}

// DetachClaim detaches every attachment of a claim, for unprepare: the pods are gone
// or going, and whatever the runtime's events missed must not outlive the claim.
func (p *Network) DetachClaim(ctx context.Context, uid string, entry *checkpoint.Claim) error {
	n := networkOf(entry)
	if n == nil {
		return nil
	}
	var errs []error
	for i, nd := range n.Devices {
		w := podWork{claimUID: uid, claim: entry.Namespace + "/" + entry.Name, device: i}
		for _, a := range slices.Backward(nd.Attachments) {
			if err := p.detachState(ctx, w, a.Pod, a.State); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := p.UnmarkClaim(uid); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// unmark removes the mark of the claim's attachments in pod.
func (p *Network) unmark(pod, claimUID string) error {
	if p == nil || p.markDir == "" {
		return nil
	}
	return attachmark.Unmark(p.markDir, pod, claimUID)
}

// UnmarkClaim removes the marks of the claim in every pod; p may be nil (no network
// attachment).
func (p *Network) UnmarkClaim(claimUID string) error {
	if p == nil || p.markDir == "" {
		return nil
	}
	return attachmark.UnmarkClaim(p.markDir, claimUID)
}

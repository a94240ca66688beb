package plugin

import (
	"context"
	"slices"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// dropGonePods drops from the claims' network records (claimNetwork.Pods) the pods that
// the claims are no longer reserved for. A prepare adds the pods of the claim's
// status.reservedFor to the record and never removes any, so that a shared claim used
// by pod after pod would list them all for as long as it lives, and each would keep the
// right to an attachment.
//
// entries are the checkpoint's entries as copied before the API was asked, and reserved
// the pods each claim that still exists is reserved for, as the API said afterwards. A
// pod leaves status.reservedFor only once it is done (deleted or terminated), and never
// comes back, so a pod of the copy that the answer does not list is gone for good. Only
// those go: a pod that a prepare merged after the copy (its claim read after the API's
// answer here) is not in the copy and stays. A gone pod also stays while it has an
// attachment of the claim in any state, until the detach (StopPodSandbox, Synchronize,
// unprepare) ends it, and a claim whose lock a request holds right now is left for the
// next run. That the pod's sandbox was removed is not enough: the kubelet removes a
// pod's old sandbox after its new one runs, and the new one needs the record.
func (d *Driver) dropGonePods(ctx context.Context, entries map[string]*checkpoint.Claim, reserved map[string][]string) {
	logger := klog.FromContext(ctx)
	for _, uid := range sortedKeys(reserved) {
		seen := networkOf(entries[uid])
		if seen == nil {
			continue
		}
		var gone []string
		for _, pod := range seen.Pods {
			if !slices.Contains(reserved[uid], pod) {
				gone = append(gone, pod)
			}
		}
		if len(gone) == 0 {
			continue
		}
		held := d.claims.tryLock(ctx, uid)
		if held == nil {
			continue // a prepare, an attach or an unprepare is working on the claim
		}
		var dropped []string
		err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
			dropped = dropped[:0]
			entry := cp.Claims[uid]
			n := networkOf(entry)
			if n == nil {
				return false, nil
			}
			for _, pod := range gone {
				if n.AttachedTo(pod) || !n.HasPod(pod) {
					continue
				}
				n.Pods = slices.DeleteFunc(n.Pods, func(p string) bool { return p == pod })
				dropped = append(dropped, pod)
			}
			if len(dropped) == 0 {
				return false, nil
			}
			entry.SetNetwork(n)
			return true, nil
		})
		held.release(nil)
		c := entries[uid]
		switch {
		case err != nil:
			logger.Error(err, "Cleanup could not drop pods the claim is no longer reserved for", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid)
		case len(dropped) > 0:
			logger.Info("Dropped pods the claim is no longer reserved for", "claim", klog.KRef(c.Namespace, c.Name), "claimUID", uid, "pods", dropped)
		}
	}
}

package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// DefaultCleanupGrace is how long a claim must have been gone before its leftovers are
// removed: long enough that a claim the API server has just created or the kubelet is
// retrying right now is never mistaken for an orphan.
const DefaultCleanupGrace = time.Minute

// orphan is a claim UID whose ResourceClaim no longer exists.
type orphan struct {
	uid string
	// entry is the checkpoint entry as it was when the claim was found missing; nil for
	// a spec without an entry.
	entry *checkpoint.Claim
}

// Cleanup removes checkpoint entries and CDI specs of claims that no longer exist in the
// API. The kubelet normally unprepares every claim it prepared, but not when the pod was
// force-deleted while the node was down or the kubelet lost its own state.
//
// The API is asked outside the checkpoint lock, so that prepare calls do not wait for
// it; removal happens under the lock and only for entries that did not change meanwhile.
// A spec without an entry (the checkpoint was lost) whose claim still exists is adopted:
// its entry is rebuilt from the claim so that overlap checks see its devices again.
func (d *Driver) Cleanup(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	var entries map[string]*checkpoint.Claim
	var specs []string
	err := d.transaction(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) (bool, error) {
		entries = make(map[string]*checkpoint.Claim, len(cp.Claims))
		for uid, c := range cp.Claims {
			entries[uid] = c.Clone()
		}
		var err error
		specs, err = d.specs.List()
		if err != nil {
			return false, fmt.Errorf("list CDI specs: %w", err)
		}
		return false, nil
	})
	if err != nil {
		return err
	}

	var orphans []orphan
	for _, uid := range sortedKeys(entries) {
		c := entries[uid]
		claim, err := d.kube.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && string(claim.UID) != uid:
			orphans = append(orphans, orphan{uid: uid, entry: c})
		case err != nil:
			logger.Error(err, "Cleanup could not look up claim, keeping it", "claim", klog.KRef(c.Namespace, c.Name))
		}
	}
	var unknown []string
	for _, uid := range specs {
		if entries[uid] == nil {
			unknown = append(unknown, uid)
		}
	}
	adopt := map[string]*checkpoint.Claim{}
	if len(unknown) > 0 {
		// Only specs without an entry need a list of all claims: their namespace and
		// name are not known. That happens after a lost checkpoint, rarely.
		list, err := d.kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list ResourceClaims: %w", err)
		}
		byUID := map[string]int{}
		for i := range list.Items {
			byUID[string(list.Items[i].UID)] = i
		}
		for _, uid := range unknown {
			i, ok := byUID[uid]
			if !ok {
				orphans = append(orphans, orphan{uid: uid})
				continue
			}
			claim := &list.Items[i]
			if claim.Status.Allocation == nil {
				orphans = append(orphans, orphan{uid: uid})
				continue
			}
			entry, _, err := d.planDevices(claim)
			if err != nil {
				logger.Error(err, "Cannot adopt CDI spec of existing claim", "claim", klog.KObj(claim))
				continue
			}
			entry.Adopted = true
			adopt[uid] = entry
		}
	}
	d.forgetReappeared(orphans)
	if len(orphans) == 0 && len(adopt) == 0 {
		return nil
	}

	removedEntries, removedSpecs := 0, 0
	err = d.transaction(ctx, func(ctx context.Context, cp *checkpoint.Checkpoint) (bool, error) {
		changed := false
		now := d.clock.Now()
		for _, o := range orphans {
			current := cp.Claims[o.uid]
			if !sameEntry(current, o.entry) {
				continue // a prepare or unprepare got there first
			}
			if !d.graceOver(o, now) {
				continue
			}
			if err := d.specs.Remove(ctx, o.uid); err != nil {
				logger.Error(err, "Cleanup could not remove CDI spec", "claimUID", o.uid)
				continue
			}
			removedSpecs++
			if current != nil {
				delete(cp.Claims, o.uid)
				removedEntries++
				changed = true
			}
			d.cleanupMu.Lock()
			delete(d.orphanSince, o.uid)
			d.cleanupMu.Unlock()
			logger.Info("Removed leftovers of a deleted claim", "claimUID", o.uid, "hadEntry", current != nil)
		}
		for uid, entry := range adopt {
			if cp.Claims[uid] != nil {
				continue
			}
			entry.UpdatedAt = d.now()
			cp.Claims[uid] = entry
			changed = true
			logger.Info("Adopted CDI spec of an existing claim missing from the checkpoint", "claim", klog.KRef(entry.Namespace, entry.Name), "claimUID", uid)
		}
		return changed, nil
	})
	d.metrics.CleanupRemoved("entry", removedEntries)
	d.metrics.CleanupRemoved("spec", removedSpecs)
	return err
}

// graceOver reports whether an orphan has been missing long enough: an entry must not
// have changed within the grace period, and a spec without entry must have been seen
// orphaned at least that long ago.
func (d *Driver) graceOver(o orphan, now time.Time) bool {
	if d.cleanupGrace <= 0 {
		return true
	}
	if o.entry != nil {
		return now.Sub(o.entry.UpdatedAt) >= d.cleanupGrace
	}
	d.cleanupMu.Lock()
	defer d.cleanupMu.Unlock()
	since, ok := d.orphanSince[o.uid]
	if !ok {
		d.orphanSince[o.uid] = now
		return false
	}
	return now.Sub(since) >= d.cleanupGrace
}

// forgetReappeared drops first-seen times of specs that are no longer orphans.
func (d *Driver) forgetReappeared(orphans []orphan) {
	still := map[string]bool{}
	for _, o := range orphans {
		still[o.uid] = true
	}
	d.cleanupMu.Lock()
	defer d.cleanupMu.Unlock()
	for uid := range d.orphanSince {
		if !still[uid] {
			delete(d.orphanSince, uid)
		}
	}
}

// sameEntry reports whether the entry is still the one the API was asked about.
func sameEntry(current, seen *checkpoint.Claim) bool {
	if current == nil || seen == nil {
		return current == nil && seen == nil
	}
	return current.Phase == seen.Phase && current.UpdatedAt.Equal(seen.UpdatedAt)
}

// RunCleanup calls Cleanup every interval until ctx ends; the first run is right away,
// so that leftovers of a long downtime go early.
func (d *Driver) RunCleanup(ctx context.Context, c clock.WithTicker, interval time.Duration) {
	logger := klog.FromContext(ctx)
	ticker := c.NewTicker(interval)
	defer ticker.Stop()
	for {
		if err := d.Cleanup(ctx); err != nil && ctx.Err() == nil {
			logger.Error(err, "Cleanup of deleted claims failed, retrying later")
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C():
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

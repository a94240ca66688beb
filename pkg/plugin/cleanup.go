package plugin

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/podnet"
)

// DefaultCleanupGrace is how long a claim must have been gone before its leftovers are
// removed: long enough that a claim the API server has just created or the kubelet is
// retrying right now is never mistaken for an orphan.
const DefaultCleanupGrace = time.Minute

// Bounds of one cleanup run: the page size of the claim list, and how many CDI specs
// without checkpoint entry one run looks up.
const (
	cleanupListPageSize   = 500
	maxUnknownSpecsPerRun = 100
)

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
// The API is asked without any lock, so that prepare calls do not wait for it. Removal
// takes the lock of each claim it removes (without waiting: a claim that a call is working
// on right now is no orphan and is skipped) and happens only for entries that did not
// change meanwhile.
// A spec without an entry (the checkpoint was lost) whose claim still exists is adopted:
// its entry is rebuilt from the claim so that overlap checks see its devices again.
func (d *Driver) Cleanup(ctx context.Context) error {
	d.claims.sweep(ctx)
	entries, err := d.copyEntries(ctx)
	if err != nil {
		return err
	}
	// Listed after the entries were copied: a spec written meanwhile belongs to an
	// entry that the copy missed, is taken for one without entry, and is then left
	// alone because its claim exists or, if not, because of the grace period.
	specs, err := d.specs.List()
	if err != nil {
		return fmt.Errorf("list CDI specs: %w", err)
	}
	orphans, reserved := d.orphanedEntries(ctx, entries)
	d.dropGonePods(ctx, entries, reserved)
	unknownOrphans, adopt, err := d.sortUnknownSpecs(ctx, unknownSpecs(ctx, specs, entries))
	if err != nil {
		return err
	}
	orphans = append(orphans, unknownOrphans...)
	d.forgetReappeared(orphans)
	if len(orphans) == 0 && len(adopt) == 0 {
		return nil
	}

	locks := d.lockForCleanup(ctx, orphans, adopt)
	defer locks.release()
	remove, err := d.removable(ctx, orphans, locks)
	if err != nil {
		return err
	}
	dropped, removedSpecs := d.removeLeftovers(ctx, remove, locks)
	removedEntries, err := d.commitCleanup(ctx, dropped, adopt, locks)
	d.metrics.CleanupRemoved("entry", removedEntries)
	d.metrics.CleanupRemoved("spec", removedSpecs)
	return err
}

// copyEntries returns a copy of the checkpoint's entries, by claim UID.
func (d *Driver) copyEntries(ctx context.Context) (map[string]*checkpoint.Claim, error) {
	var entries map[string]*checkpoint.Claim
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		entries = make(map[string]*checkpoint.Claim, len(cp.Claims))
		for uid, c := range cp.Claims {
			entries[uid] = c.Clone()
		}
		return false, nil
	})
	return entries, err
}

// orphanedEntries asks the API for the claim of each entry, in UID order, and returns
// the entries whose claim is gone or was replaced by another of the same name, and, by
// UID, the pods that each claim that still exists is reserved for. A claim the API
// cannot tell about is kept.
func (d *Driver) orphanedEntries(ctx context.Context, entries map[string]*checkpoint.Claim) ([]orphan, map[string][]string) {
	logger := klog.FromContext(ctx)
	var orphans []orphan
	reserved := map[string][]string{}
	for _, uid := range sortedKeys(entries) {
		c := entries[uid]
		claim, err := d.kube.ResourceV1().ResourceClaims(c.Namespace).Get(ctx, c.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err), err == nil && string(claim.UID) != uid:
			orphans = append(orphans, orphan{uid: uid, entry: c})
		case err != nil:
			logger.Error(err, "Cleanup could not look up claim, keeping it", "claim", klog.KRef(c.Namespace, c.Name))
		default:
			reserved[uid] = podnet.ReservedPods(claim)
		}
	}
	return orphans, reserved
}

// unknownSpecs returns the specs (by claim UID, in the order listed) that have no entry,
// at most maxUnknownSpecsPerRun of them.
func unknownSpecs(ctx context.Context, specs []string, entries map[string]*checkpoint.Claim) []string {
	var unknown []string
	for _, uid := range specs {
		if entries[uid] == nil {
			unknown = append(unknown, uid)
		}
	}
	if len(unknown) > maxUnknownSpecsPerRun {
		// Bounded work per run: the rest waits for the next run (in UID order, so the
		// same ones come first and go first once their grace is over).
		klog.FromContext(ctx).Info("More CDI specs without checkpoint entry than one cleanup run handles; the rest waits for the next run",
			"specs", len(unknown), "thisRun", maxUnknownSpecsPerRun)
		unknown = unknown[:maxUnknownSpecsPerRun]
	}
	return unknown
}

// sortUnknownSpecs splits specs without an entry into orphans, whose claim no longer
// uses this node, and entries to adopt, rebuilt from a claim that is still allocated here.
func (d *Driver) sortUnknownSpecs(ctx context.Context, unknown []string) ([]orphan, map[string]*checkpoint.Claim, error) {
	adopt := map[string]*checkpoint.Claim{}
	if len(unknown) == 0 {
		return nil, adopt, nil
	}
	// Only specs without an entry need a list of claims: their namespace and name are not
	// known. That happens after a lost checkpoint, rarely. The list is read in pages and
	// only the claims looked for are kept, so memory stays bounded whatever the number of
	// claims in the cluster.
	found, err := d.findClaims(ctx, unknown)
	if err != nil {
		return nil, nil, fmt.Errorf("list ResourceClaims: %w", err)
	}
	var orphans []orphan
	for _, uid := range unknown {
		claim := found[uid]
		if claim == nil || !d.allocatedHere(claim) {
			// Gone, deallocated, or allocated again elsewhere: nothing of this node's can
			// still use the spec.
			orphans = append(orphans, orphan{uid: uid})
			continue
		}
		entry, _, err := d.planDevices(claim)
		if err != nil {
			klog.FromContext(ctx).Error(err, "Cannot adopt CDI spec of existing claim", "claim", klog.KObj(claim))
			continue
		}
		entry.Adopted = true
		adopt[uid] = entry
	}
	return orphans, adopt, nil
}

// cleanupLocks are the claim locks one cleanup run holds, and which of their claims it
// removed, whose lock files go with the release.
type cleanupLocks struct {
	held map[string]*heldClaims
	gone map[string]bool
}

// holds reports whether the run holds the lock of claim uid.
func (l *cleanupLocks) holds(uid string) bool { return l.held[uid] != nil }

// release unlocks every claim the run holds.
func (l *cleanupLocks) release() {
	for uid, h := range l.held {
		h.release(map[string]bool{uid: l.gone[uid]})
	}
}

// lockForCleanup locks the claims to change without waiting; busy ones are being prepared
// or unprepared right now and are left out.
func (d *Driver) lockForCleanup(ctx context.Context, orphans []orphan, adopt map[string]*checkpoint.Claim) *cleanupLocks {
	l := &cleanupLocks{held: map[string]*heldClaims{}, gone: map[string]bool{}}
	tryLock := func(uid string) {
		if l.held[uid] == nil {
			if h := d.claims.tryLock(ctx, uid); h != nil {
				l.held[uid] = h
			}
		}
	}
	for _, o := range orphans {
		tryLock(o.uid)
	}
	for uid := range adopt {
		tryLock(uid)
	}
	return l
}

// removable returns the orphans to remove now: locked, unchanged since the API was asked,
// and gone for longer than the grace period. With the claims locked their entries cannot
// change, so what is decided here still holds when the specs are removed and the entries
// dropped.
func (d *Driver) removable(ctx context.Context, orphans []orphan, locks *cleanupLocks) ([]orphan, error) {
	var remove []orphan
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		remove = remove[:0]
		now := d.clock.Now()
		for _, o := range orphans {
			if !locks.holds(o.uid) || !sameEntry(cp.Claims[o.uid], o.entry) || !d.graceOver(o, now) {
				continue // a prepare or unprepare got there first, or not long enough gone
			}
			remove = append(remove, o)
		}
		return false, nil
	})
	return remove, err
}

// removeLeftovers removes the CDI spec, device metadata and attachment marks of each
// orphan. It returns the UIDs whose checkpoint entry is to be dropped (those whose spec
// is gone) and how many specs it removed.
func (d *Driver) removeLeftovers(ctx context.Context, remove []orphan, locks *cleanupLocks) (dropped []string, removedSpecs int) {
	logger := klog.FromContext(ctx)
	for _, o := range remove {
		if err := d.specs.Remove(ctx, o.uid); err != nil {
			logger.Error(err, "Cleanup could not remove CDI spec", "claimUID", o.uid)
			continue
		}
		removedSpecs++
		d.removeClaimFiles(ctx, o)
		locks.gone[o.uid] = true
		if o.entry != nil {
			dropped = append(dropped, o.uid)
		}
		d.cleanupMu.Lock()
		delete(d.orphanSince, o.uid)
		d.cleanupMu.Unlock()
		logger.Info("Removed leftovers of a deleted claim", "claimUID", o.uid, "hadEntry", o.entry != nil)
	}
	return dropped, removedSpecs
}

// removeClaimFiles removes the device metadata and the attachment marks of an orphan
// whose spec is gone; a failure is logged and does not stop the removal.
func (d *Driver) removeClaimFiles(ctx context.Context, o orphan) {
	logger := klog.FromContext(ctx)
	var ns, name string
	if o.entry != nil {
		ns, name = o.entry.Namespace, o.entry.Name
	}
	if err := d.metadataFiles.removeClaim(o.uid, ns, name); err != nil {
		logger.Error(err, "Cleanup could not remove the device metadata of a deleted claim", "claimUID", o.uid)
	}
	if err := d.net.UnmarkClaim(o.uid); err != nil {
		logger.Error(err, "Cleanup could not remove the attachment marks of a deleted claim", "claimUID", o.uid)
	}
}

// commitCleanup drops the entries of removed claims and adds the adopted entries of the
// claims the run holds that still have none. It returns how many entries it dropped.
func (d *Driver) commitCleanup(ctx context.Context, dropped []string, adopt map[string]*checkpoint.Claim, locks *cleanupLocks) (int, error) {
	logger := klog.FromContext(ctx)
	removedEntries := 0
	err := d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		changed := false
		removedEntries = 0
		for _, uid := range dropped {
			if cp.Claims[uid] != nil {
				delete(cp.Claims, uid)
				removedEntries++
				changed = true
			}
		}
		for uid, entry := range adopt {
			if !locks.holds(uid) || cp.Claims[uid] != nil {
				continue
			}
			entry.UpdatedAt = d.now()
			cp.Claims[uid] = entry.Clone()
			changed = true
			logger.Info("Adopted CDI spec of an existing claim missing from the checkpoint", "claim", klog.KRef(entry.Namespace, entry.Name), "claimUID", uid)
		}
		return changed, nil
	})
	return removedEntries, err
}

// findClaims returns the claims among uids that exist, by UID. It lists the claims of the
// cluster in pages of cleanupListPageSize and keeps copies of the matching ones only, and
// stops as soon as all were found: a ResourceClaim has no field selector for its UID,
// and its namespace and name are not known.
func (d *Driver) findClaims(ctx context.Context, uids []string) (map[string]*resourceapi.ResourceClaim, error) {
	want := make(map[string]bool, len(uids))
	for _, uid := range uids {
		want[uid] = true
	}
	found := make(map[string]*resourceapi.ResourceClaim, len(uids))
	opts := metav1.ListOptions{Limit: cleanupListPageSize}
	for {
		list, err := d.kube.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			if uid := string(list.Items[i].UID); want[uid] {
				// A copy, so that the page itself can be collected.
				found[uid] = list.Items[i].DeepCopy()
			}
		}
		if len(found) == len(want) || list.Continue == "" {
			return found, nil
		}
		opts.Continue = list.Continue
	}
}

// allocatedHere reports whether the claim is allocated with a device of this driver that
// this node publishes (or published before a change of the device model).
func (d *Driver) allocatedHere(claim *resourceapi.ResourceClaim) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != d.driverName {
			continue
		}
		if _, ok := d.devices.Lookup(r.Pool, r.Device); ok {
			return true
		}
	}
	return false
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

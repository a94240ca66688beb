package claimstatus

import (
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// optimisticLockMsg starts the API server's message for a write against an old
// resourceVersion (a Conflict, like a failed UID precondition, which is final).
const optimisticLockMsg = "the object has been modified"

// IsStaleWrite reports whether err is the API server's refusal of a write against an old
// resourceVersion: the claim changed since it was read, so read it again and retry. A
// Conflict for any other reason (a failed UID precondition: the claim was replaced) is
// not. Other writers of a claim's status that patch with the same guards use it too.
func IsStaleWrite(err error) bool {
	return apierrors.IsConflict(err) && strings.Contains(err.Error(), optimisticLockMsg)
}

// cloneEntries copies the entries and their condition lists, which a write may extend.
func cloneEntries(in []resourceapi.AllocatedDeviceStatus) []resourceapi.AllocatedDeviceStatus {
	out := make([]resourceapi.AllocatedDeviceStatus, len(in))
	for i := range in {
		out[i] = in[i]
		out[i].Conditions = slices.Clone(in[i].Conditions)
	}
	return out
}

// keepConditions carries the conditions of the given types in the entries in old over
// to the entries of the same device in ours, which the writer is about to write: the
// writer replaces the driver's entries whole, and conditions that another writer owns
// (the fabric gate's, which pods that share a claim and are still to be bound wait for)
// must survive that.
func keepConditions(ours, old []resourceapi.AllocatedDeviceStatus, conditionTypes []string) {
	for i := range ours {
		for _, o := range old {
			if o.Driver != ours[i].Driver || o.Pool != ours[i].Pool || o.Device != ours[i].Device || !equalStringPtr(o.ShareID, ours[i].ShareID) {
				continue
			}
			for _, c := range o.Conditions {
				for _, typ := range conditionTypes {
					if c.Type == typ {
						ours[i].Conditions = append(ours[i].Conditions, c)
					}
				}
			}
		}
	}
}

func equalStringPtr(a, b *string) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}

package plugin

import (
	"fmt"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// checkOverlap refuses devices that another claim on this node already holds. The
// scheduler should never allocate them twice; this is the last line of defense against
// two unrelated workloads sharing a port that one of them was promised alone.
//
// Two devices of different claims conflict when they are on the same port and either
// is exclusive, or when they are the same device with the same share ID (a legacy
// single-share device, or a share that was somehow handed out twice). Shares of one
// shared device with different share IDs are the point of sharing and never conflict.
// Admin-access allocations only observe and conflict with nothing. Entries in both
// phases count: a Started entry may be completed by the kubelet's retry.
//
// It runs inside the checkpoint's critical section (for every claim of every prepare),
// so the sorted UIDs, which make the reported conflict deterministic, are computed once.
func checkOverlap(cp *checkpoint.Checkpoint, uid string, devices []checkpoint.Device) error {
	uids := checkpoint.SortedUIDs(cp)
	for _, dev := range devices {
		if dev.AdminAccess {
			continue
		}
		for _, otherUID := range uids {
			if otherUID == uid {
				continue
			}
			other := cp.Claims[otherUID]
			for _, held := range other.Devices {
				if held.AdminAccess {
					continue
				}
				if why := conflict(dev, held); why != "" {
					return fmt.Errorf("device %q (%s port %d) conflicts with device %q prepared for claim %s/%s (uid %s): %s",
						dev.Device, dev.IBDev, dev.Port, held.Device, other.Namespace, other.Name, other.UID, why)
				}
			}
		}
	}
	return nil
}

// conflict says why two devices of different claims cannot both be prepared, or "".
func conflict(want, held checkpoint.Device) string {
	samePort := want.PortKey != "" && want.PortKey == held.PortKey
	switch {
	case samePort && want.Exclusive:
		return "an exclusive device needs its port to itself"
	case samePort && held.Exclusive:
		return "the port is held exclusively"
	case want.Pool == held.Pool && want.Device == held.Device && want.ShareID == held.ShareID:
		return "the same device share is already in use"
	}
	return ""
}

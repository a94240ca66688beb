package plugin

import (
	"fmt"
	"iter"
	"strings"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// checkOverlap refuses devices that other claims on this node already hold. The
// scheduler should never allocate them twice; this is the last line of defense against
// two unrelated workloads sharing a port that one of them was promised alone, or more
// workloads sharing a port than it was published for.
//
// Two devices of different claims conflict when either is exclusive and they are on the
// same port or on ports of the same RDMA device, which share its uverbs node
// (devicemodel.ExclusiveConflict), or when they are the same device with the same share
// ID (a legacy single-share device, or a share that was somehow handed out twice).
// Shares of one shared device with different share IDs are the point of sharing and
// conflict only when together they consume more than the device's published capacity
// (checkShares).
// Admin-access allocations only observe and conflict with nothing. Entries in both
// phases count: a Started entry may be completed by the kubelet's retry.
//
// It runs inside the checkpoint's critical section (for every claim of every prepare),
// so the sorted UIDs, which make the reported conflict deterministic, are computed once.
func checkOverlap(cp *checkpoint.Checkpoint, want *checkpoint.Claim) error {
	uids := checkpoint.SortedUIDs(cp)
	for i := range want.Devices {
		dev := &want.Devices[i]
		if dev.AdminAccess {
			continue
		}
		for _, otherUID := range uids {
			if otherUID == want.UID {
				continue
			}
			other := cp.Claims[otherUID]
			for j := range other.Devices {
				held := &other.Devices[j]
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
	return checkShares(cp, uids, want)
}

// conflict says why two devices of different claims cannot both be prepared, or "".
func conflict(want, held *checkpoint.Device) string {
	for w := range holdings(want) {
		for h := range holdings(held) {
			if why := devicemodel.ExclusiveConflict(w, h); why != "" {
				return why
			}
		}
	}
	if want.Pool == held.Pool && want.Device == held.Device && want.ShareID == held.ShareID {
		return "the same device share is already in use"
	}
	return ""
}

// holdings yields what devicemodel.ExclusiveConflict compares of a prepared device: its
// port, or each port of a legacy device, which holds them as a share does. It allocates
// nothing: checkOverlap calls it for every pair of devices on the node.
func holdings(d *checkpoint.Device) iter.Seq[devicemodel.Holding] {
	return func(yield func(devicemodel.Holding) bool) {
		if len(d.Ports) == 0 {
			yield(devicemodel.Holding{IBDev: d.IBDev, PortKey: d.PortKey, Exclusive: d.Exclusive})
			return
		}
		for _, p := range d.Ports {
			if !yield(devicemodel.Holding{IBDev: p.IBDev, PortKey: p.PortKey}) {
				return
			}
		}
	}
}

// checkShares refuses a claim whose shares of a shared device, added to those that other
// claims on the node hold of it, exceed the capacity the device is published with. The
// scheduler counts shares from the API's view of the allocations; the plugin counts what
// is actually prepared here, so a lost update, a bug or a hand-written allocation cannot
// put more workloads on a port than the admin allowed. The capacity is the one the device
// has now (the wanted entry's MaxShares, from the published device).
func checkShares(cp *checkpoint.Checkpoint, uids []string, want *checkpoint.Claim) error {
	type key struct{ pool, device string }
	wanted := map[key]int64{}
	var order []key
	for _, dev := range want.Devices {
		if dev.AdminAccess || dev.Exclusive || dev.MaxShares <= 0 {
			continue
		}
		k := key{dev.Pool, dev.Device}
		if _, ok := wanted[k]; !ok {
			order = append(order, k)
		}
		wanted[k] += sharesOf(dev)
	}
	for _, k := range order {
		var capacity int
		for _, dev := range want.Devices {
			if dev.Pool == k.pool && dev.Device == k.device && !dev.AdminAccess {
				capacity = dev.MaxShares
				break
			}
		}
		held := int64(0)
		var holders []string
		for _, uid := range uids {
			if uid == want.UID {
				continue
			}
			other := cp.Claims[uid]
			n := int64(0)
			for _, dev := range other.Devices {
				if !dev.AdminAccess && dev.Pool == k.pool && dev.Device == k.device {
					n += sharesOf(dev)
				}
			}
			if n > 0 {
				held += n
				holders = append(holders, fmt.Sprintf("%s/%s: %d", other.Namespace, other.Name, n))
			}
		}
		if total := held + wanted[k]; total > int64(capacity) {
			return fmt.Errorf("claim %s/%s (uid %s) asks for %d shares of device %q, which is published with %d shares of which %d are prepared for other claims (%s)",
				want.Namespace, want.Name, want.UID, wanted[k], k.device, capacity, held, holdersText(holders))
		}
	}
	return nil
}

// sharesOf is what a prepared device consumes of its shared device: its recorded shares,
// at least one (entries of earlier versions and legacy single-share devices record none).
func sharesOf(dev checkpoint.Device) int64 {
	return max(dev.Shares, 1)
}

func holdersText(holders []string) string {
	const shown = 5
	if len(holders) <= shown {
		return strings.Join(holders, ", ")
	}
	return strings.Join(holders[:shown], ", ") + fmt.Sprintf(" and %d more claims", len(holders)-shown)
}

// consumedShares is how many shares of a shared (or legacy) device an allocation
// consumes: its consumed capacity rdma.dra.io/shares, or 1 (the capacity's default
// request) when the API server recorded none. A value that is not a positive whole number
// is refused.
func consumedShares(r resourceapi.DeviceRequestAllocationResult, dev devicemodel.Device) (int64, error) {
	if dev.Mode == devicemodel.ModeExclusive {
		return 0, nil
	}
	q, ok := r.ConsumedCapacity[devicemodel.SharesCapacity]
	if !ok {
		return 1, nil
	}
	n, exact := q.AsInt64()
	if !exact || n < 1 {
		return 0, fmt.Errorf("request %q: device %q consumes %s of capacity %s, want a positive whole number", r.Request, r.Device, q.String(), devicemodel.SharesCapacity)
	}
	return n, nil
}

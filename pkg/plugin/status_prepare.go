package plugin

import (
	"context"
	"path"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// The status prepare reports, in the StatusWriter's terms.

// refOf is the ClaimRef of a claim object.
func refOf(claim *resourceapi.ResourceClaim) ClaimRef {
	return ClaimRef{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, Generation: claim.Generation}
}

// prepareStatus is the status prepare reports for a claim: each prepared device is Ready
// and names its port.
func prepareStatus(prepared []checkpoint.Device, devices []cdi.ClaimDevice) []DeviceStatus {
	out := make([]DeviceStatus, 0, len(prepared))
	for i, dev := range prepared {
		var data *v1alpha1.DeviceStatusData
		for _, port := range devices[i].AllPorts() {
			uverbs := ""
			if port.Verbs != nil {
				uverbs = path.Join("/dev/infiniband", port.Verbs.Name)
			}
			if data == nil {
				data = newDeviceData(&port, uverbs)
			} else {
				data.MorePorts = append(data.MorePorts, *newDeviceData(&port, uverbs))
			}
		}
		out = append(out, DeviceStatus{Pool: dev.Pool, Device: dev.Device, ShareID: dev.ShareID, Data: data})
	}
	return out
}

// enqueue is prepare's call: it sets the status of a prepared claim, keeping network
// data that a later step (network attachment) reported for the same devices. It costs
// no API request.
func (s *StatusWriter) enqueue(_ context.Context, claim *resourceapi.ResourceClaim, prepared []checkpoint.Device, devices []cdi.ClaimDevice) {
	if len(prepared) == 0 {
		return
	}
	next := prepareStatus(prepared, devices)
	s.Update(refOf(claim), func(current []DeviceStatus) []DeviceStatus {
		for i := range next {
			for _, c := range current {
				if c.Pool == next[i].Pool && c.Device == next[i].Device && c.ShareID == next[i].ShareID {
					next[i].Network = c.Network
				}
			}
		}
		return next
	})
}

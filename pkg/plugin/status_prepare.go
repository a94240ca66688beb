package plugin

import (
	"path"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/claimstatus"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// The status prepare reports, in the claim status writer's terms (pkg/claimstatus).

// newDeviceData is the status data of a device on port p whose uverbs device the
// container sees at uverbs. Its port facts are a few of the inventory's (discovery.Port),
// under the same field names and JSON keys (TestDeviceDataIsInventorySubset checks it);
// the whole port would put some thirty facts into every claim's status.
func newDeviceData(p *discovery.Port, uverbs string) *v1alpha1.DeviceStatusData {
	return &v1alpha1.DeviceStatusData{IBDev: p.IBDev, Port: p.Port, LinkLayer: p.LinkLayer, GIDIndex: p.GIDIndex, Netdev: p.Netdev, UVerbs: uverbs}
}

// prepareStatus is the status prepare reports for a claim: each prepared device is Ready
// and names its port.
func prepareStatus(prepared []checkpoint.Device, devices []cdi.ClaimDevice) []claimstatus.DeviceStatus {
	out := make([]claimstatus.DeviceStatus, 0, len(prepared))
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
		out = append(out, claimstatus.DeviceStatus{Pool: dev.Pool, Device: dev.Device, ShareID: dev.ShareID, Data: data})
	}
	return out
}

// enqueueStatus is prepare's call: it sets the status of a prepared claim in w, keeping
// network data that a later step (network attachment) reported for the same devices. It
// costs no API request.
func enqueueStatus(w *claimstatus.Writer, claim *resourceapi.ResourceClaim, prepared []checkpoint.Device, devices []cdi.ClaimDevice) {
	if len(prepared) == 0 {
		return
	}
	next := prepareStatus(prepared, devices)
	w.Update(claimstatus.RefOf(claim), func(current []claimstatus.DeviceStatus) []claimstatus.DeviceStatus {
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

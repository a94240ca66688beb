package claimstatus

import (
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// ConditionReady is the condition the Writer sets on each device entry it writes: the
// driver prepared the device.
const ConditionReady = "Ready"

// ClaimRef names the claim a status is for. The UID makes the write fail instead of
// touching a claim that was deleted and created again under the same name; Generation
// is the observedGeneration of the conditions.
type ClaimRef struct {
	Namespace, Name string
	UID             types.UID
	Generation      int64
}

// RefOf is the ClaimRef of a claim object.
func RefOf(claim *resourceapi.ResourceClaim) ClaimRef {
	return ClaimRef{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID, Generation: claim.Generation}
}

// NetworkDeviceData is what a pod got of a device's network (status.devices[].networkData).
type NetworkDeviceData struct {
	// InterfaceName is the interface's name inside the pod.
	InterfaceName string
	// IPs are the interface's addresses in CIDR form ("192.0.2.5/24").
	IPs []string
	// HardwareAddress is the interface's MAC address.
	HardwareAddress string
}

// DeviceStatus is the status of one prepared device of a claim, identified by pool,
// device and share ID like the allocation result it belongs to.
type DeviceStatus struct {
	Pool, Device, ShareID string
	// Data is written to status.devices[].data; nil writes none.
	Data *v1alpha1.DeviceStatusData
	// Network, when set, is written to status.devices[].networkData.
	Network *NetworkDeviceData
}

func cloneDeviceStatus(in []DeviceStatus) []DeviceStatus {
	out := slices.Clone(in)
	for i := range out {
		out[i].Data = out[i].Data.DeepCopy()
		if n := out[i].Network; n != nil {
			c := *n
			c.IPs = slices.Clone(n.IPs)
			out[i].Network = &c
		}
	}
	return out
}

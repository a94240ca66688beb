package mockgpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

func TestResources(t *testing.T) {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: ptr.To(s)} }
	num := func(i int64) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{IntValue: ptr.To(i)} }
	tests := []struct {
		name string
		gpus []GPU
		want []resourceapi.Device
	}{{
		name: "GPU server",
		gpus: fixtureGPUs(),
		want: []resourceapi.Device{{
			Name: "gpu-0",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"resource.kubernetes.io/pcieRoot": str("pci0000:18"),
				"resource.kubernetes.io/pciBusID": str("0000:1b:00.0"),
				"gpu.mock.rdma.dra.io/index":      num(0),
				"gpu.mock.rdma.dra.io/numa_node":  num(0),
				"gpu.mock.rdma.dra.io/model":      str("H100"),
			},
		}, {
			Name: "gpu-1",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"resource.kubernetes.io/pcieRoot": str("pci0000:97"),
				"resource.kubernetes.io/pciBusID": str("0000:9a:00.0"),
				"gpu.mock.rdma.dra.io/index":      num(1),
				"gpu.mock.rdma.dra.io/numa_node":  num(1),
				"gpu.mock.rdma.dra.io/model":      str("H100"),
			},
		}, {
			// NUMA node unknown: the attribute is left out.
			Name: "gpu-2",
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				"resource.kubernetes.io/pcieRoot": str("pci0001:c0"),
				"resource.kubernetes.io/pciBusID": str("0001:c0:00.0"),
				"gpu.mock.rdma.dra.io/index":      num(2),
				"gpu.mock.rdma.dra.io/model":      str("10de:9999"),
			},
		}},
	}, {
		name: "no GPUs: an empty slice",
		want: []resourceapi.Device{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Resources("node-a", tt.gpus)
			want := resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
				"node-a-gpu": {Slices: []resourceslice.Slice{{Devices: tt.want}}},
			}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Resources() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

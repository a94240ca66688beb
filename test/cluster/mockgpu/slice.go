package mockgpu

import (
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// PoolName is the name of the node's pool: <node>-gpu, never the bare node name, so that
// it cannot equal another driver's pool on the node (the 1.36 allocator keys counters by
// pool name alone; the RDMA driver's pool is <node>-rdma).
func PoolName(node string) string { return node + "-gpu" }

// Device is the ResourceSlice device of g.
func Device(g GPU) resourceapi.Device {
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		deviceattribute.StandardDeviceAttributePCIeRoot: {StringValue: ptr.To(g.PCIeRoot)},
		deviceattribute.StandardDeviceAttributePCIBusID: {StringValue: ptr.To(g.BusID)},
		AttrIndex: {IntValue: ptr.To(int64(g.Index))},
		AttrModel: {StringValue: ptr.To(g.Model())},
	}
	if g.NUMANode != nil {
		attrs[AttrNUMANode] = resourceapi.DeviceAttribute{IntValue: ptr.To(int64(*g.NUMANode))}
	}
	return resourceapi.Device{Name: g.Name, Attributes: attrs}
}

// Resources is what the plugin publishes for node: one pool (PoolName) with one slice
// that holds a device per GPU, in the order of gpus. A node without GPUs publishes the
// pool with an empty slice, which says so.
func Resources(node string, gpus []GPU) resourceslice.DriverResources {
	devices := make([]resourceapi.Device, 0, len(gpus))
	for _, g := range gpus {
		devices = append(devices, Device(g))
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		PoolName(node): {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

package devicemodel

import (
	"fmt"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"
)

// How the API limits one ResourceSlice (k8s.io/api/resource/v1 at v0.37.1) and how the
// model fits in:
//
//   - A slice has either devices or shared counters, never both. Counter sets go to
//     slices of their own; devices of any slice of the pool consume them.
//   - At most ResourceSliceMaxCounterSets (8) counter sets per slice: one counter slice
//     serves 8 ports.
//   - At most ResourceSliceMaxDevices (128) devices per slice, and
//     ResourceSliceMaxDevicesWithAdvancedFeatures (64) as soon as one device of the
//     slice has taints or consumes counters. The limit is applied per slice, so a
//     legacy slice without a tainted port still takes 128 devices.
//   - At most 32 attributes and capacities per device: the model has 29 attributes and
//     1 capacity at most (a test keeps it so).
//
// A port's devices always share a slice; so do its counter set's neighbours, in port
// order, which keeps the layout stable when a port changes state.

// pack lays the port groups out in slices: the counter slices first, then the device
// slices. An empty node still gets one (empty) slice, because an empty pool tells the
// scheduler that the driver runs and has nothing, which no pool does not.
func pack(groups []portGroup) []resourceslice.Slice {
	var out []resourceslice.Slice
	var counters []resourceapi.CounterSet
	for _, g := range groups {
		if g.counterSet == nil {
			continue
		}
		if len(counters) == resourceapi.ResourceSliceMaxCounterSets {
			out = append(out, resourceslice.Slice{SharedCounters: counters})
			counters = nil
		}
		counters = append(counters, *g.counterSet)
	}
	if len(counters) > 0 {
		out = append(out, resourceslice.Slice{SharedCounters: counters})
	}

	var devices []resourceapi.Device
	for _, g := range groups {
		if len(devices) > 0 && len(devices)+len(g.devices) > maxDevices(devices, g.devices) {
			out = append(out, resourceslice.Slice{Devices: devices})
			devices = nil
		}
		devices = append(devices, g.devices...)
	}
	if len(devices) > 0 || len(out) == 0 {
		out = append(out, resourceslice.Slice{Devices: devices})
	}
	return out
}

// maxDevices is the device limit of a slice holding both lists.
func maxDevices(lists ...[]resourceapi.Device) int {
	for _, list := range lists {
		for i := range list {
			if len(list[i].Taints) > 0 || len(list[i].ConsumesCounters) > 0 {
				return resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			}
		}
	}
	return resourceapi.ResourceSliceMaxDevices
}

// sliceIndexMinLength is the resourceslice controller's minimum width of the hex index
// that starts a slice name.
const sliceIndexMinLength = 5

// ResourceSlices renders the result as the ResourceSlice objects the resourceslice
// controller would create for the node, generation 1. Names follow the controller's
// scheme, "<index>-<driver>-<node>", without its random suffix, so that they are
// stable and a controller that finds them adopts them by index.
func (r *Result) ResourceSlices() []*resourceapi.ResourceSlice {
	pool := r.Resources.Pools[r.PoolName]
	n := len(pool.Slices)
	width := max(sliceIndexMinLength, len(fmt.Sprintf("%x", max(n-1, 0))))
	out := make([]*resourceapi.ResourceSlice, 0, n)
	for i, s := range pool.Slices {
		name := fmt.Sprintf("%0*x-%s-%s", width, i, r.DriverName, r.NodeName)
		if len(name) > 253 {
			// The index prefix keeps truncated names unique.
			name = strings.TrimRight(name[:253], "-.")
		}
		out = append(out, &resourceapi.ResourceSlice{
			TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSlice"},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:         r.DriverName,
				NodeName:       ptr.To(r.NodeName),
				Pool:           resourceapi.ResourcePool{Name: r.PoolName, Generation: 1, ResourceSliceCount: int64(n)},
				Devices:        s.Devices,
				SharedCounters: s.SharedCounters,
			},
		})
	}
	return out
}

package scale

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// gpuResources are the slices a GPU driver would publish on node with inventory inv, in a
// pool named after the node (pool names are unique per driver in a cluster): one
// GPU per PCIe root that has RDMA ports (as on a DGX, one GPU beside each NIC), with the
// standard PCIe-root attribute and a memory capacity, the way GPU drivers shape theirs.
func gpuResources(node string, inv *discovery.Inventory) resourceslice.DriverResources {
	var roots []string
	for _, p := range inv.Ports {
		if p.PCIeRoot != "" && !slices.Contains(roots, p.PCIeRoot) {
			roots = append(roots, p.PCIeRoot)
		}
	}
	slices.Sort(roots)
	devices := make([]resourceapi.Device, 0, len(roots))
	for i, root := range roots {
		devices = append(devices, resourceapi.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
				resourceapi.QualifiedName(pcieRootAttribute): {StringValue: ptr.To(root)},
				"productName": {StringValue: ptr.To("simulated H100 80GB HBM3")},
				"index":       {IntValue: ptr.To(int64(i))},
			},
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"memory": {Value: apiresource.MustParse("80Gi")},
			},
		})
	}
	return resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{
		node: {Slices: []resourceslice.Slice{{Devices: devices}}},
	}}
}

// publishGPUs publishes (on) or removes (off) the GPU driver's slices of every node and
// waits for the API server to have them; like the RDMA slices, they stay without their
// controllers.
func (c *Cluster) publishGPUs(ctx context.Context, on bool) error {
	return parallelN(ctx, len(c.nodes), publishWorkers, func(pctx context.Context, i int) error {
		n := c.nodes[i]
		if n.gpu == nil {
			n.gpu = newSliceSink(ctx, c.plugins, gpuDriver, n.obj)
			// A controller started to remove the GPU pool learns of the pool's slices
			// from its informer, and would wait the default 30 s before it deletes them.
			n.gpu.syncDelay = ptr.To(time.Duration(0))
		}
		res := resourceslice.DriverResources{}
		if on {
			res = gpuResources(n.name, n.kind.inv)
		}
		if err := n.gpu.PublishResources(pctx, res); err != nil {
			return err
		}
		defer n.gpu.Stop()
		return n.gpu.waitPublished(pctx, c.cp.Client)
	})
}

package controller

import (
	"context"
	"fmt"
	"math"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// Usage is what a pool has and what of it is in use; see RdmaPoolStatus for the fields.
type Usage struct {
	Nodes, Ports, AllocatedPorts int32
	Shares, AllocatedShares      int64
	Allocated, Free              int64
}

// deviceKey names a published device the way an allocation result does.
type deviceKey struct{ pool, device string }

// portKey names a port across both of its devices: the shared and the exclusive device
// (and the legacy single-share devices) of one port have the same key. The device of a
// legacy pool, which has no port of its own, is a key of its own.
type portKey struct {
	pool, ibdev string
	port        int64
}

// publishedDevice is one device of the driver in the current ResourceSlices.
type publishedDevice struct {
	key  deviceKey
	port portKey
	node string
	cel  dracel.Device
	// raw is the device in the informer's slice, which nobody modifies.
	raw    *resourceapi.Device
	shared bool
	// legacy is the device of a legacy pool, which stands for ports ports of its node;
	// it is not shared (its port key is its own), but has shares.
	legacy bool
	ports  int64
	// shares is the device's rdma.dra.io/shares capacity; 1 for a legacy single-share
	// device, 0 for an exclusive device.
	shares int64
}

// devicePort returns the port a device hands out, from its ibdev and port attributes;
// a device without them is a port of its own.
func devicePort(driverName, pool string, d *resourceapi.Device) portKey {
	ibdevAttr, _ := devicemodel.LookupAttribute(driverName, d, attrQualified(attrIBDev))
	portAttr, _ := devicemodel.LookupAttribute(driverName, d, attrQualified(attrPort))
	ibdev, port := ibdevAttr.StringValue, portAttr.IntValue
	if ibdev == nil || port == nil {
		return portKey{pool: pool, ibdev: d.Name}
	}
	return portKey{pool: pool, ibdev: *ibdev, port: *port}
}

func attrQualified(a celAttribute) resourceapi.QualifiedName {
	return resourceapi.QualifiedName(a.domain + "/" + a.id)
}

// counter adds up a pool's usage over resource pools.
type counter struct {
	u                     Usage
	nodes                 sets.Set[string]
	ports, allocatedPorts sets.Set[portKey]
	freeShares, freePorts int64
	// legacyPorts and legacyAllocatedPorts add up the ports of legacy devices, all of
	// them and those with an allocation; each node's device stands for its own ports.
	legacyPorts, legacyAllocatedPorts int64
}

// addResourcePool counts the devices of one resource pool's visible slices that sel
// selects. The ports busy in either mode come from every visible device, selected or
// not: the two devices of a port share one counter, so an allocation of either blocks
// the other mode.
func (c *counter) addResourcePool(ctx context.Context, idx *index, pool string, sel *selection, vis []*indexedSlice) {
	if c.nodes == nil {
		c.nodes, c.ports, c.allocatedPorts = sets.New[string](), sets.New[portKey](), sets.New[portKey]()
	}
	var exclusiveBusy, sharedBusy sets.Set[portKey]
	for _, s := range vis {
		for i := range s.devices {
			d := &s.devices[i]
			if d.legacy || idx.results[d.key] == 0 {
				continue
			}
			if d.shared {
				sharedBusy = insert(sharedBusy, d.port)
			} else {
				exclusiveBusy = insert(exclusiveBusy, d.port)
			}
		}
	}
	for _, s := range vis {
		for _, i := range sel.matchesOf(ctx, pool, s) {
			d := &s.devices[i]
			c.nodes.Insert(d.node)
			if d.legacy {
				c.addLegacy(d, idx.consumed[d.key])
				continue
			}
			if !c.ports.Has(d.port) {
				c.ports.Insert(d.port)
				if !exclusiveBusy.Has(d.port) && !sharedBusy.Has(d.port) {
					c.freePorts++
				}
			}
			consumed := idx.consumed[d.key]
			if consumed > 0 {
				c.allocatedPorts.Insert(d.port)
			}
			if d.shared {
				c.u.Shares += d.shares
				c.u.AllocatedShares += consumed
				if !exclusiveBusy.Has(d.port) {
					c.freeShares += max(d.shares-consumed, 0)
				}
			}
		}
	}
}

// addLegacy counts a legacy device with consumed shares allocated: its ports, and its
// shares in the unit of a legacy pool. Which of its node's ports it stands for is the
// node's business (and the scheduler's, through counters): whole-port claims on them do
// not make its shares less free here, nor does an allocation of it make ports less free
// in other pools.
func (c *counter) addLegacy(d *publishedDevice, consumed int64) {
	c.legacyPorts += d.ports
	if consumed > 0 {
		c.legacyAllocatedPorts += d.ports
	}
	c.u.Shares += d.shares
	c.u.AllocatedShares += consumed
	c.freeShares += max(d.shares-consumed, 0)
}

// insert adds k to s, making s first if it is nil.
func insert[K comparable](s sets.Set[K], k K) sets.Set[K] {
	if s == nil {
		s = sets.New[K]()
	}
	return s.Insert(k)
}

// usage is the count in the pool's unit: shares (shared, legacy) or whole ports
// (exclusive). A legacy pool selects legacy devices only, the other pools none.
func (c *counter) usage(mode v1alpha1.PoolMode) Usage {
	u := c.u
	u.Nodes = int32(c.nodes.Len())
	u.Ports = clampInt32(int64(c.ports.Len()) + c.legacyPorts)
	u.AllocatedPorts = clampInt32(int64(c.allocatedPorts.Len()) + c.legacyAllocatedPorts)
	switch mode {
	case v1alpha1.PoolModeShared, v1alpha1.PoolModeLegacy:
		u.Allocated, u.Free = u.AllocatedShares, c.freeShares
	default:
		u.Allocated, u.Free = int64(u.AllocatedPorts), c.freePorts
	}
	return u
}

// clampInt32 keeps a sum of published attributes in the range of a status field.
func clampInt32(n int64) int32 {
	return int32(min(max(n, 0), math.MaxInt32))
}

// String is for logs.
func (u Usage) String() string {
	return fmt.Sprintf("nodes=%d ports=%d shares=%d allocated=%d free=%d", u.Nodes, u.Ports, u.Shares, u.Allocated, u.Free)
}

// celDevice is what a selector sees of a published device.
func celDevice(driver string, d *resourceapi.Device) dracel.Device {
	return dracel.Device{Driver: driver, AllowMultipleAllocations: d.AllowMultipleAllocations,
		Attributes: d.Attributes, Capacity: d.Capacity}
}

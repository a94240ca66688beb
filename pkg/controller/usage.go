package controller

import (
	"context"
	"fmt"

	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"

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
// (and the legacy single-share devices) of one port have the same key.
type portKey struct {
	pool, ibdev string
	port        int64
}

// publishedDevice is one device of the driver in the current ResourceSlices.
type publishedDevice struct {
	key    deviceKey
	port   portKey
	node   string
	cel    dracel.Device
	shared bool
	// shares is the device's rdma.dra.io/shares capacity; 1 for a legacy single-share
	// device, 0 for an exclusive device.
	shares int64
}

// Inventory is the driver's published devices and their allocations, indexed once and
// shared by the status of every pool.
type Inventory struct {
	devices []publishedDevice
	// consumed is the shares (or 1) allocated per device, summed over all claims.
	consumed map[deviceKey]int64
	// exclusiveBusy and sharedBusy say which ports have an allocated exclusive or
	// shared device: either one blocks the other mode (the shared counter).
	exclusiveBusy, sharedBusy map[portKey]bool
}

// NewInventory indexes the ResourceSlices and ResourceClaims of driverName. Only the
// newest generation of each resource pool counts, like in the scheduler.
func NewInventory(driverName string, slices []*resourceapi.ResourceSlice, claims []*resourceapi.ResourceClaim) *Inventory {
	newest := map[string]int64{}
	for _, s := range slices {
		if s.Spec.Driver == driverName && s.Spec.Pool.Generation > newest[s.Spec.Pool.Name] {
			newest[s.Spec.Pool.Name] = s.Spec.Pool.Generation
		}
	}
	inv := &Inventory{consumed: map[deviceKey]int64{}, exclusiveBusy: map[portKey]bool{}, sharedBusy: map[portKey]bool{}}
	byKey := map[deviceKey]*publishedDevice{}
	for _, s := range slices {
		if s.Spec.Driver != driverName || s.Spec.Pool.Generation != newest[s.Spec.Pool.Name] {
			continue
		}
		node := s.Spec.Pool.Name
		if s.Spec.NodeName != nil {
			node = *s.Spec.NodeName
		}
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			pd := publishedDevice{
				key:  deviceKey{pool: s.Spec.Pool.Name, device: d.Name},
				port: devicePort(driverName, s.Spec.Pool.Name, d),
				node: node,
				cel:  celDevice(driverName, d),
			}
			if mode, _ := devicemodel.LookupAttribute(driverName, d, attrQualified(attrMode)); mode.StringValue != nil && *mode.StringValue == string(devicemodel.ModeShared) {
				pd.shared = true
				pd.shares = 1
				if c, ok := d.Capacity[devicemodel.SharesCapacity]; ok {
					pd.shares = c.Value.Value()
				}
			}
			inv.devices = append(inv.devices, pd)
		}
	}
	for i := range inv.devices {
		byKey[inv.devices[i].key] = &inv.devices[i]
	}
	for _, claim := range claims {
		if claim.Status.Allocation == nil {
			continue
		}
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != driverName {
				continue
			}
			d, ok := byKey[deviceKey{pool: r.Pool, device: r.Device}]
			if !ok {
				continue // allocated from a slice that is gone or not yet seen
			}
			amount := int64(1)
			if q, ok := r.ConsumedCapacity[devicemodel.SharesCapacity]; ok {
				amount = q.Value()
			}
			inv.consumed[d.key] += amount
			if d.shared {
				inv.sharedBusy[d.port] = true
			} else {
				inv.exclusiveBusy[d.port] = true
			}
		}
	}
	return inv
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

// Usage counts what the selector selects and what of it is allocated. A device the
// selector cannot be evaluated on is skipped and logged: the scheduler would fail on it
// as well, and the count should not hide the rest.
func (inv *Inventory) Usage(ctx context.Context, mode v1alpha1.PoolMode, selector dracel.CompilationResult) Usage {
	logger := klog.FromContext(ctx)
	var u Usage
	nodes := map[string]bool{}
	ports := map[portKey]bool{}
	allocatedPorts := map[portKey]bool{}
	var freeShares int64
	for i := range inv.devices {
		d := &inv.devices[i]
		ok, _, err := selector.DeviceMatches(ctx, d.cel)
		if err != nil {
			logger.V(2).Info("Pool selector fails on a device", "pool", d.key.pool, "device", d.key.device, "err", err)
			continue
		}
		if !ok {
			continue
		}
		nodes[d.node] = true
		ports[d.port] = true
		consumed := inv.consumed[d.key]
		if consumed > 0 {
			allocatedPorts[d.port] = true
		}
		if d.shared {
			u.Shares += d.shares
			u.AllocatedShares += consumed
			if !inv.exclusiveBusy[d.port] {
				freeShares += max(d.shares-consumed, 0)
			}
		}
	}
	u.Nodes, u.Ports, u.AllocatedPorts = int32(len(nodes)), int32(len(ports)), int32(len(allocatedPorts))
	if mode == v1alpha1.PoolModeShared {
		u.Allocated, u.Free = u.AllocatedShares, freeShares
		return u
	}
	u.Allocated = int64(u.AllocatedPorts)
	for p := range ports {
		if !inv.exclusiveBusy[p] && !inv.sharedBusy[p] {
			u.Free++
		}
	}
	return u
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

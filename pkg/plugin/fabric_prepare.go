package plugin

import (
	"errors"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/fabric"
)

// checkFabric refuses to prepare a claim while a port of one of its gated devices is not
// ready for traffic, with the message the gate would have written (fabric.go). Where the
// API server keeps binding conditions the pod was bound only once the gate said ready,
// and this finds the same unless the port failed since; where it drops them (before
// 1.36, DRADeviceBindingConditions off) this is what holds the pod back: the kubelet
// retries prepare, and the pod starts once the port is ready. A device is gated when the
// published model says so (the node configuration) or its allocation result carries the
// binding condition. Admin-access allocations observe and are never held back.
func (d *Driver) checkFabric(plan *claimPlan) error {
	if d.fabric == nil {
		return nil
	}
	var errs []error
	for i, dev := range plan.entry.Devices {
		if dev.AdminAccess || !d.fabricGated(plan.claim, dev) {
			continue
		}
		want := fabric.Want{}
		if n := plan.devices[i].Config.Network; n != nil && n.PKey != nil {
			if v, err := v1alpha1.ParsePKey(*n.PKey); err == nil {
				want.PKey = &v
			}
		}
		for _, p := range plan.devices[i].AllPorts() {
			if err := d.fabric.Check(&p, want); err != nil {
				errs = append(errs, fmt.Errorf("request %q, device %q: fabric not ready: %w", dev.Request, dev.Device, err))
				break
			}
		}
	}
	return errors.Join(errs...)
}

// fabricGated reports whether the readiness of dev's ports holds its claim back.
func (d *Driver) fabricGated(claim *resourceapi.ResourceClaim, dev checkpoint.Device) bool {
	if md, ok := d.devices.Lookup(dev.Pool, dev.Device); ok && md.FabricGated {
		return true
	}
	if claim.Status.Allocation == nil {
		return false
	}
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver == d.driverName && r.Pool == dev.Pool && r.Device == dev.Device && r.Request == dev.Request &&
			slices.Contains(r.BindingConditions, devicemodel.FabricReadyCondition) {
			return true
		}
	}
	return false
}

package framework

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Features are what the cluster's API server keeps of the DRA fields the driver writes,
// found by server-side dry runs: a field whose feature gate is off is dropped silently, so
// asking the server is the only way to know what a cluster of any version and any gates
// supports. The plugin chooses its device model the same way (a slice's dropped fields).
type Features struct {
	// Version is the API server's gitVersion, e.g. v1.34.4; Minor its minor number.
	Version string
	Minor   int
	// PartitionableDevices: shared counters and devices consuming them are kept
	// (DRAPartitionableDevices).
	PartitionableDevices bool
	// ConsumableCapacity: allowMultipleAllocations and capacity request policies are kept
	// (DRAConsumableCapacity).
	ConsumableCapacity bool
	// DeviceTaints: devices' taints are kept (DRADeviceTaints).
	DeviceTaints bool
	// ExtendedResource: a DeviceClass's extendedResourceName is kept (DRAExtendedResource).
	ExtendedResource bool
	// BindingConditions: devices' binding conditions are kept (DRADeviceBindingConditions
	// with DRAResourceClaimDeviceStatus, beta and on by default from 1.36).
	BindingConditions bool
}

// Partitionable is whether the API server takes the driver's default device model (a port
// whole and in shares); without it the plugin publishes the legacy model.
func (f Features) Partitionable() bool { return f.PartitionableDevices && f.ConsumableCapacity }

// Model names the device model the plugin publishes with these features: "partitionable"
// or "legacy".
func (f Features) Model() string {
	if f.Partitionable() {
		return "partitionable"
	}
	return "legacy"
}

// DefaultOn is whether a DRA beta feature that the driver uses is on by default at this
// version: DRAPartitionableDevices, DRAConsumableCapacity, DRADeviceTaints and
// DRAExtendedResource are (docs/install.md) from 1.36. On older versions their absence
// is what a cluster with default settings looks like, not a fault.
func (f Features) DefaultOn() bool { return f.Minor >= 36 }

// ServerFeatures asks the API server which of the driver's DRA fields it keeps.
func (e *Env) ServerFeatures(ctx context.Context) (Features, error) {
	var f Features
	v, err := e.Client.Discovery().ServerVersion()
	if err != nil {
		return f, fmt.Errorf("server version: %w", err)
	}
	f.Version = v.GitVersion
	if f.Minor, err = strconv.Atoi(strings.TrimRight(v.Minor, "+")); err != nil {
		return f, fmt.Errorf("server version %s: minor %q: %w", v.GitVersion, v.Minor, err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}

	counters, device := probeSlices(e.Node)
	gotCounters, err := e.Client.ResourceV1().ResourceSlices().Create(ctx, counters, dry)
	if err != nil {
		return f, fmt.Errorf("dry-run create of a probe ResourceSlice with shared counters: %w", err)
	}
	gotDevice, err := e.Client.ResourceV1().ResourceSlices().Create(ctx, device, dry)
	if err != nil {
		return f, fmt.Errorf("dry-run create of a probe ResourceSlice with a device: %w", err)
	}
	if len(gotDevice.Spec.Devices) != 1 {
		return f, fmt.Errorf("dry-run create of a probe ResourceSlice returned %d devices, want 1", len(gotDevice.Spec.Devices))
	}
	d := gotDevice.Spec.Devices[0]
	f.PartitionableDevices = len(gotCounters.Spec.SharedCounters) > 0 && len(d.ConsumesCounters) > 0
	f.ConsumableCapacity = ptr.Deref(d.AllowMultipleAllocations, false) && d.Capacity[probeCapacity].RequestPolicy != nil
	f.DeviceTaints = len(d.Taints) > 0
	f.BindingConditions = len(d.BindingConditions) > 0

	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-probe-"},
		Spec:       resourceapi.DeviceClassSpec{ExtendedResourceName: ptr.To("e2e.rdma.dra.io/probe")},
	}
	gotClass, err := e.Client.ResourceV1().DeviceClasses().Create(ctx, class, dry)
	if err != nil {
		return f, fmt.Errorf("dry-run create of a probe DeviceClass: %w", err)
	}
	f.ExtendedResource = gotClass.Spec.ExtendedResourceName != nil
	return f, nil
}

const probeCapacity = "e2e.rdma.dra.io/shares"

// probeSlices are two ResourceSlices of one pool with one field of each feature, shaped as
// the driver publishes them: a counter set in a slice of its own (a slice has devices or
// counters, not both), and a device that consumes it, may be allocated several times by
// capacity, carries a taint and has binding conditions.
func probeSlices(node string) (counters, device *resourceapi.ResourceSlice) {
	one, two := resource.MustParse("1"), resource.MustParse("2")
	slice := func() *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-probe-"},
			Spec: resourceapi.ResourceSliceSpec{
				Driver:   "e2e.rdma.dra.io",
				NodeName: ptr.To(node),
				Pool:     resourceapi.ResourcePool{Name: "e2e-probe", ResourceSliceCount: 2},
			},
		}
	}
	counters, device = slice(), slice()
	counters.Spec.SharedCounters = []resourceapi.CounterSet{{
		Name: "port", Counters: map[string]resourceapi.Counter{"shares": {Value: two}},
	}}
	device.Spec.Devices = []resourceapi.Device{{
		Name:                     "probe",
		AllowMultipleAllocations: ptr.To(true),
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
			probeCapacity: {Value: two, RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: ptr.To(one)}},
		},
		ConsumesCounters: []resourceapi.DeviceCounterConsumption{{
			CounterSet: "port", Counters: map[string]resourceapi.Counter{"shares": {Value: one}},
		}},
		Taints: []resourceapi.DeviceTaint{{Key: "e2e.rdma.dra.io/probe", Effect: resourceapi.DeviceTaintEffectNoSchedule}},
		// Both lists or neither: the API server requires failure conditions with binding
		// conditions.
		BindingConditions:        []string{"e2e.rdma.dra.io/Ready"},
		BindingFailureConditions: []string{"e2e.rdma.dra.io/Failed"},
	}}
	return counters, device
}

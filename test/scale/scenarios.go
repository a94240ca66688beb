package scale

import (
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// The DeviceClasses the scenarios ask for: the chart's default pools, and the GPU
// driver's class.
const (
	sharedClass    = "rdma-shared"
	exclusiveClass = "rdma-exclusive"
	gpuClass       = "gpu.scale.example.com"
	gpuDriver      = "gpu.scale.example.com"
)

// pcieRootAttribute is the standard attribute both drivers publish for a device's PCIe
// root complex.
const pcieRootAttribute resourceapi.FullyQualifiedName = "resource.kubernetes.io/pcieRoot"

// Scenario is what each pod of a measurement asks for.
type Scenario struct {
	// Name is the scenario's key in the results.
	Name string `json:"name"`
	// Description says what a pod asks for, for the report.
	Description string `json:"description"`
	// ExtendedResource pods ask for one unit of the device plugin's resource instead of
	// a claim.
	ExtendedResource bool `json:"extended_resource,omitempty"`
	// GPUs needs the GPU driver's slices in the cluster.
	GPUs bool `json:"gpus,omitempty"`
	// claim is the pod's claim template spec; nil with ExtendedResource.
	claim func() resourceapi.ResourceClaimSpec
	// perNode, if set, is how many of the scenario's pods node n holds with fill of its
	// ports taken, where that is few enough to limit a point's pods (see podsFor).
	perNode func(n *simNode, fill float64) int
}

// wholePorts is how many one-whole-port pods node n holds at fill: its ports not taken.
func wholePorts(n *simNode, fill float64) int {
	return len(n.kind.inv.Ports) - len(filledPorts(n.kind, n.index, fill))
}

// numaAligned is how many pods asking for per whole ports on one NUMA node an empty
// node n holds (the scenario runs on the empty cluster only).
func numaAligned(per int) func(n *simNode, fill float64) int {
	return func(n *simNode, _ float64) int {
		ports := map[int]int{}
		for _, p := range n.kind.inv.Ports {
			if p.NUMANode != nil {
				ports[*p.NUMANode]++
			}
		}
		held := 0
		for _, c := range ports {
			held += c / per
		}
		return held
	}
}

// podsFor is how many pods a point of scenario s measures on nodes at fill: the burst
// and the paced pods asked for, or, where the cluster holds fewer of them, three
// quarters of what it holds for the burst and the rest for the paced pods, so that every
// pod can be bound.
func podsFor(s Scenario, nodes []*simNode, fill float64, burst, paced int) (int, int) {
	if s.perNode == nil {
		return burst, paced
	}
	room := 0
	for _, n := range nodes {
		room += s.perNode(n, fill)
	}
	if burst+paced <= room {
		return burst, paced
	}
	b := room * 3 / 4
	return b, min(paced, room-b)
}

func exact(name, class string, count int64) resourceapi.DeviceRequest {
	return resourceapi.DeviceRequest{Name: name, Exactly: &resourceapi.ExactDeviceRequest{
		DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count,
	}}
}

// The scenarios; scenarioOrder lists them in the report's order.
var (
	ScenarioShare = Scenario{Name: "share", Description: "one share of any port (rdma-shared, count 1)",
		claim: func() resourceapi.ResourceClaimSpec {
			return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exact("rdma", sharedClass, 1)}}}
		}}
	ScenarioExtendedResource = Scenario{Name: "extended-resource", ExtendedResource: true,
		Description: "one unit of " + string(ExtendedResource) + " (the device plugin's status quo), no claim"}
	ScenarioWholePort = Scenario{Name: "whole-port", Description: "one whole port (rdma-exclusive, count 1)",
		claim: func() resourceapi.ResourceClaimSpec {
			return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{exact("rdma", exclusiveClass, 1)}}}
		},
		perNode: wholePorts}
	ScenarioNUMA = Scenario{Name: "numa-aligned-4", Description: "4 whole ports on one NUMA node (matchAttribute numa_node)",
		claim: func() resourceapi.ResourceClaimSpec {
			attr := resourceapi.FullyQualifiedName(devicemodel.AttrNUMANode)
			return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests:    []resourceapi.DeviceRequest{exact("rdma", exclusiveClass, 4)},
				Constraints: []resourceapi.DeviceConstraint{{Requests: []string{"rdma"}, MatchAttribute: &attr}},
			}}
		},
		perNode: numaAligned(4)}
	ScenarioGPUNIC = Scenario{Name: "gpu-nic-pcie", GPUs: true,
		Description: "a GPU of a second driver and one share of a port on the same PCIe root (matchAttribute " + string(pcieRootAttribute) + ")",
		claim: func() resourceapi.ResourceClaimSpec {
			attr := pcieRootAttribute
			return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
				Requests:    []resourceapi.DeviceRequest{exact("gpu", gpuClass, 1), exact("nic", sharedClass, 1)},
				Constraints: []resourceapi.DeviceConstraint{{Requests: []string{"gpu", "nic"}, MatchAttribute: &attr}},
			}}
		}}
	ScenarioFirstAvailable = Scenario{Name: "first-available", Description: "a whole port, else one share (firstAvailable)",
		claim: func() resourceapi.ResourceClaimSpec {
			return resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "rdma",
				FirstAvailable: []resourceapi.DeviceSubRequest{
					{Name: "whole", DeviceClassName: exclusiveClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
					{Name: "share", DeviceClassName: sharedClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1},
				},
			}}}}
		}}
)

// podSpec is the spec of a pod of scenario s; template names its claim template.
func (s Scenario) podSpec(template string) v1.PodSpec {
	zero := int64(0)
	c := v1.Container{Name: "app", Image: "registry.invalid/scale/app:none"}
	spec := v1.PodSpec{TerminationGracePeriodSeconds: &zero}
	if s.ExtendedResource {
		one := *apiresource.NewQuantity(1, apiresource.DecimalSI)
		c.Resources = v1.ResourceRequirements{Limits: v1.ResourceList{ExtendedResource: one}, Requests: v1.ResourceList{ExtendedResource: one}}
	} else {
		c.Resources = v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "rdma"}}}
		spec.ResourceClaims = []v1.PodResourceClaim{{Name: "rdma", ResourceClaimTemplateName: &template}}
	}
	spec.Containers = []v1.Container{c}
	return spec
}

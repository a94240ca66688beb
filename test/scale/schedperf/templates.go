package schedperf

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/test/bench"
	"github.com/rdma-dra/rdma-dra-driver/test/scale"
)

// DefaultProfile is the mock node every simulated node of the benchmark is: 8
// InfiniBand and 2 RoCE ports, like the nodes of the scale harness's first profile.
const DefaultProfile = "dgx-h100"

// The DeviceClasses of the chart's default RdmaPools the measured pods ask for.
const (
	// ShareClass hands out one share of a port.
	ShareClass = "rdma-shared"
	// PortClass hands out a whole port.
	PortClass = "rdma-exclusive"
)

const (
	// nodeNameTemplate is the name scheduler_perf gives the node of index .Index that
	// its node-with-dra-test-driver.yaml template creates.
	nodeNameTemplate = "scheduler-perf-dra-{{.Index}}"
	// placeholderNode is the node name the model is built for before nodeNameTemplate
	// takes its place: Build wants a valid node name, the template is not one.
	placeholderNode = "schedperf-placeholder-node"
	// podClaimTemplate is the ResourceClaimTemplate that scheduler_perf's
	// pod-with-claim-template.yaml refers to.
	podClaimTemplate = "test-claim-template"
)

// NodeName is the name of scheduler_perf's node i: what nodeNameTemplate renders to.
func NodeName(i int) string { return fmt.Sprintf("scheduler-perf-dra-%d", i) }

// NodeTemplates are the ResourceSlices of one node of a mock profile as scheduler_perf
// templates.
type NodeTemplates struct {
	// Slices are the node's ResourceSlices in the plugin's order, each a createAny
	// template of one object: rendered with .Index i, it is what the plugin publishes
	// on node NodeName(i).
	Slices [][]byte
	// Ports is the number of the node's ports.
	Ports int
	// Shares is the number of shares of each port's shared device, 0 if the model has
	// none: what a whole-port claim of the capacity model asks for.
	Shares int64
}

// SliceTemplates builds model m of a node of profile, its mock node written below dir,
// and turns each of its ResourceSlices into a template. The node name appears in a
// slice's name, its nodeName and its pool's name, and nowhere else (checked).
func SliceTemplates(ctx context.Context, profile string, m scale.Model, dir string) (*NodeTemplates, error) {
	inv, err := scale.ProfileInventory(ctx, profile, dir)
	if err != nil {
		return nil, err
	}
	res, err := scale.BuildModel(inv, placeholderNode, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", profile, err)
	}
	out := &NodeTemplates{}
	ports := map[string]bool{}
	for _, d := range res.Devices {
		ports[d.PortKey] = true
	}
	out.Ports = len(ports)
	for i, s := range res.ResourceSlices() {
		for _, d := range s.Spec.Devices {
			c, ok := d.Capacity[devicemodel.SharesCapacity]
			if !ok {
				continue
			}
			if shares := c.Value.Value(); out.Shares == 0 {
				out.Shares = shares
			} else if shares != out.Shares {
				return nil, fmt.Errorf("the %s model of %s has ports of %d and of %d shares; a whole-port claim of the benchmark asks for one number", m, profile, out.Shares, shares)
			}
		}
		if !strings.Contains(s.Name, placeholderNode) || !strings.Contains(s.Spec.Pool.Name, placeholderNode) {
			return nil, fmt.Errorf("slice %d of %s: name %q or pool %q does not contain the node name %s", i, profile, s.Name, s.Spec.Pool.Name, placeholderNode)
		}
		s.Name = strings.ReplaceAll(s.Name, placeholderNode, nodeNameTemplate)
		s.Spec.Pool.Name = strings.ReplaceAll(s.Spec.Pool.Name, placeholderNode, nodeNameTemplate)
		s.Spec.NodeName = ptr.To(nodeNameTemplate)
		data, err := yaml.Marshal(s)
		if err != nil {
			return nil, fmt.Errorf("encode slice %d of %s: %w", i, profile, err)
		}
		if bytes.Contains(data, []byte(placeholderNode)) {
			return nil, fmt.Errorf("slice %d of %s names the node outside its name, nodeName and pool, which the template would not rename", i, profile)
		}
		out.Slices = append(out.Slices, data)
	}
	return out, nil
}

// ClassTemplates are the DeviceClasses of the chart's default RdmaPools, by name, as
// bench.DeviceClasses makes them (the controller's CEL for each pool), with the type
// set so that scheduler_perf can map them. repo is the repository root.
func ClassTemplates(repo string) (map[string][]byte, error) {
	classes, err := bench.DeviceClasses(repo)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for name, dc := range classes {
		dc = dc.DeepCopy()
		dc.TypeMeta = metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "DeviceClass"}
		data, err := yaml.Marshal(dc)
		if err != nil {
			return nil, fmt.Errorf("encode DeviceClass %s: %w", name, err)
		}
		out[name] = data
	}
	for _, name := range []string{ShareClass, PortClass} {
		if out[name] == nil {
			return nil, fmt.Errorf("the chart has no RdmaPool %s (pools: %v)", name, slices.Sorted(maps.Keys(out)))
		}
	}
	return out, nil
}

// Request is what a claim of the benchmark asks for: one device of Class and, if Shares
// is set, that many of its shares (a whole port of the capacity model).
type Request struct {
	Class  string
	Shares int64
}

// deviceClaim is r as a claim's devices, named as upstream's claims name their request.
func (r Request) deviceClaim() resourceapi.DeviceClaim {
	exact := &resourceapi.ExactDeviceRequest{
		DeviceClassName: r.Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
	}
	if r.Shares > 0 {
		exact.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]apiresource.Quantity{
			devicemodel.SharesCapacity: *apiresource.NewQuantity(r.Shares, apiresource.DecimalSI),
		}}
	}
	return resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "req-0", Exactly: exact}}}
}

// ClaimTemplate is the ResourceClaimTemplate of the measured pods when they ask for r.
// Its name is the one scheduler_perf's pod template refers to.
func ClaimTemplate(r Request) ([]byte, error) {
	t := &resourceapi.ResourceClaimTemplate{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimTemplate"},
		ObjectMeta: metav1.ObjectMeta{Name: podClaimTemplate},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: r.deviceClaim()}},
	}
	data, err := yaml.Marshal(t)
	if err != nil {
		return nil, fmt.Errorf("encode the claim template of %s: %w", r.Class, err)
	}
	return data, nil
}

// FillClaim is the template of the claims that fill the cluster before the measurement:
// claim .Index asks for r; scheduler_perf's allocResourceClaims allocates them on random
// nodes. name tells the fill claims of two templates apart.
func FillClaim(name string, r Request) ([]byte, error) {
	c := &resourceapi.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "rdma-fill-" + name + "-{{.Index}}"},
		Spec:       resourceapi.ResourceClaimSpec{Devices: r.deviceClaim()},
	}
	data, err := yaml.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("encode the fill claim of %s: %w", r.Class, err)
	}
	return data, nil
}

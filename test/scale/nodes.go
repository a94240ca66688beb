package scale

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Profiles are the mock profiles the simulated nodes take in turn: the 8-port InfiniBand
// DGX-like node, RoCE in hardware LAG, and InfiniBand mixed with a bonded RoCE pair.
var Profiles = []string{"dgx-h100", "roce-lag", "mixed-bond"}

// ExtendedResource is the device plugin's resource (the NVIDIA k8s-rdma-shared-dev-plugin's
// default pool name), the status quo this driver is compared with.
const ExtendedResource v1.ResourceName = "rdma/hca_shared_devices_a"

// kwokAnnotation marks the nodes kwok manages.
const kwokAnnotation = "kwok.x-k8s.io/node"

// kind is one mock profile, discovered once: every node of the profile has its inventory.
type kind struct {
	profile string
	inv     *discovery.Inventory
	// shares is what one node of the profile hands out as one-share claims in the
	// default model: the sum of its shared devices' capacity. It is the node's capacity
	// of the extended resource, so that both ways offer the same.
	shares int
	// sharedPorts are the ports with a shared device, sorted, by their exclusive device's
	// name (the PortKey).
	sharedPorts []string
	// catalog is each model's devices of a node of the profile: the device names and
	// what they hand out do not depend on the node's name, only the pool's name does
	// (TestCatalogIndependentOfNode). The fill and the flaps read it; a node's own slices
	// are built when it publishes and not kept by the harness.
	catalog map[Model]map[string]devicemodel.Device
}

// models are the models the harness publishes.
var models = []Model{ModelDefault, ModelLegacy, ModelPerNIC, ModelFewAttributes}

// build is model m of the profile's inventory on node.
func (k *kind) build(node string, m Model) (*devicemodel.Result, error) {
	res, err := BuildModel(k.inv, node, m)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.profile, err)
	}
	return res, nil
}

// BuildModel is model m of a node with inventory inv: the plugin's own, with the node
// configuration's modes for the per-NIC and the capacity model, and derived from the
// default model for the few-attributes one.
func BuildModel(inv *discovery.Inventory, node string, m Model) (*devicemodel.Result, error) {
	o := ModelOptions(node, m == ModelLegacy)
	switch m {
	case ModelPerNIC:
		o.Config.Modes = nodeconfig.ModesExclusive
	case ModelCapacity:
		o.Config.Modes = nodeconfig.ModesShared
	case ModelDefault, ModelLegacy, ModelFewAttributes:
	default:
		return nil, fmt.Errorf("unknown model %q", m)
	}
	res, err := devicemodel.Build(inv, o)
	if err != nil {
		return nil, fmt.Errorf("build the %s model of %s: %w", m, node, err)
	}
	if m == ModelFewAttributes {
		return withAttributes(res, fewAttributes), nil
	}
	return res, nil
}

// discoverKinds writes each profile's mock node below dir and discovers it.
func discoverKinds(ctx context.Context, dir string) ([]*kind, error) {
	var out []*kind
	for _, name := range Profiles {
		inv, err := ProfileInventory(ctx, name, dir)
		if err != nil {
			return nil, err
		}
		k := &kind{profile: name, inv: inv, catalog: map[Model]map[string]devicemodel.Device{}}
		for _, m := range models {
			res, err := k.build(catalogNode, m)
			if err != nil {
				return nil, err
			}
			k.catalog[m] = res.Devices
		}
		for _, d := range k.catalog[ModelDefault] {
			if d.Mode == devicemodel.ModeShared {
				k.shares += d.MaxShares
				k.sharedPorts = append(k.sharedPorts, d.PortKey)
			}
		}
		slices.Sort(k.sharedPorts)
		out = append(out, k)
	}
	return out, nil
}

// catalogNode is the node name the profiles' catalogs are built for.
const catalogNode = "catalog"

// ProfileInventory writes the mock node of profile below dir and discovers it, as the
// plugin would on that node.
func ProfileInventory(ctx context.Context, profile, dir string) (*discovery.Inventory, error) {
	root := filepath.Join(dir, profile)
	if err := mocknode.WriteProfile(profile, root, mocknode.WriteOptions{Overwrite: true}); err != nil {
		return nil, err
	}
	inv, err := discovery.New(discovery.Options{SysfsRoot: filepath.Join(root, mocknode.SysDir)}).Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover mock node %s: %w", profile, err)
	}
	return inv, nil
}

// ModelOptions are the plugin's defaults (no node configuration) for node, in the legacy
// model or the default one.
func ModelOptions(node string, legacy bool) devicemodel.Options {
	cfg := nodeconfig.Config{}
	cfg.SetDefaults()
	return devicemodel.Options{NodeName: node, Legacy: legacy, Config: cfg}
}

// simNode is one simulated node.
type simNode struct {
	name  string
	index int
	kind  *kind
	obj   *v1.Node
	// pub publishes the node's RDMA slices, gpu its GPU slices (only in the GPU scenario).
	pub *nodePublisher
	gpu *sliceSink
	// running says the node's plugin (Publisher and ResourceSlice controller) runs the
	// whole time; the other nodes' stop once their slices are published.
	running bool
}

// nodeName is the name of the i-th simulated node.
func nodeName(i int) string { return fmt.Sprintf("sim-%05d", i) }

// nodeObject is what the harness creates for a simulated node: annotated for kwok, with
// room for any number of pods and the extended resource the device plugin would advertise.
func nodeObject(name string, k *kind) *v1.Node {
	res := v1.ResourceList{
		v1.ResourceCPU:    apiresource.MustParse("256"),
		v1.ResourceMemory: apiresource.MustParse("2Ti"),
		v1.ResourcePods:   apiresource.MustParse("10000"),
		ExtendedResource:  *apiresource.NewQuantity(int64(k.shares), apiresource.DecimalSI),
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "type": "kwok", "scale.rdma.dra.io/profile": k.profile},
		},
		Status: v1.NodeStatus{Capacity: res, Allocatable: res},
	}
}

// filledPorts picks the ports of node i that a fill level takes whole: round(fill × ports),
// at random but the same in every run and every model.
func filledPorts(k *kind, i int, fill float64) []string {
	n := int(fill*float64(len(k.sharedPorts)) + 0.5)
	if n == 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(uint64(i), 0x5ca1e))
	perm := rng.Perm(len(k.sharedPorts))
	out := make([]string, 0, n)
	for _, p := range perm[:n] {
		out = append(out, k.sharedPorts[p])
	}
	slices.Sort(out)
	return out
}

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Variant is one way of publishing a node's ports.
type Variant struct {
	// Name is the label in the report.
	Name string `json:"name"`
	// Legacy selects the legacy model: Shares single-share devices per port.
	Legacy bool `json:"legacy"`
	// Shares is the shared capacity of a port (the default model) or the number of
	// single-share devices of a port (legacy).
	Shares int `json:"shares"`
	// LegacyResource adds a legacy resource of every port (nodeconfig.LegacyResource):
	// one more device per node, and the ports' counters in one legacy counter set.
	LegacyResource bool `json:"legacyResource,omitempty"`
}

// DefaultVariant is what a node publishes without a node configuration.
var DefaultVariant = Variant{Name: "partitionable, 16 shares (default)", Shares: nodeconfig.DefaultShares}

// comparedVariants are the models the report puts side by side: the default model with
// as many shares as each legacy model has share devices.
var comparedVariants = []Variant{
	{Name: "partitionable, 8 shares", Shares: 8},
	{Name: "legacy, 8 share devices", Legacy: true, Shares: 8},
	{Name: "partitionable, 64 shares", Shares: 64},
	{Name: "legacy, 64 share devices", Legacy: true, Shares: 64},
}

// legacyResourceVariant is the default model on nodes that also keep a device plugin's
// unit (a legacy resource of every port): what migrated nodes publish. It is measured
// beside DefaultVariant by BenchmarkAllocate1000Nodes, not in the report.
var legacyResourceVariant = Variant{Name: "partitionable, 16 shares, legacy resource", Shares: nodeconfig.DefaultShares, LegacyResource: true}

// options are the devicemodel options of the variant for one node.
func (v Variant) options(node string) devicemodel.Options {
	cfg := nodeconfig.Config{Shares: v.Shares, Legacy: nodeconfig.LegacyConfig{Mode: nodeconfig.LegacyModeShared, Shares: v.Shares}}
	if v.LegacyResource {
		cfg.LegacyResources = []nodeconfig.LegacyResource{{Name: "hca-shared-devices-a"}}
	}
	cfg.SetDefaults()
	return devicemodel.Options{NodeName: node, Legacy: v.Legacy, Config: cfg}
}

// build returns the ResourceSlices that node publishes with the variant.
func (v Variant) build(inv *discovery.Inventory, node string) ([]*resourceapi.ResourceSlice, *devicemodel.Result, error) {
	res, err := devicemodel.Build(inv, v.options(node))
	if err != nil {
		return nil, nil, fmt.Errorf("build %s model of %s: %w", v.Name, node, err)
	}
	out := res.ResourceSlices()
	return out, res, nil
}

// eightPortInventory discovers the 8-port mock node (8 ConnectX-7 NDR InfiniBand ports)
// written below dir: the node every per-node figure of the report is about.
func eightPortInventory(ctx context.Context, dir string) (*discovery.Inventory, error) {
	root, err := writeScaledNode(filepath.Join(dir, "inventory-8"), 8)
	if err != nil {
		return nil, err
	}
	inv, err := discovery.New(discovery.Options{SysfsRoot: root}).Discover(ctx)
	if err != nil {
		return nil, fmt.Errorf("discover 8-port node: %w", err)
	}
	return inv, nil
}

// SliceSize is the size of one node's ResourceSlices.
type SliceSize struct {
	Variant Variant `json:"variant"`
	Slices  int     `json:"slices"`
	Devices int     `json:"devices"`
	Bytes   int     `json:"bytes"`
}

// sliceBytes is the JSON size of slices as the plugin sends them.
func sliceBytes(slices []*resourceapi.ResourceSlice) (int, error) {
	total := 0
	for _, s := range slices {
		b, err := json.Marshal(s)
		if err != nil {
			return 0, fmt.Errorf("encode slice %s: %w", s.Name, err)
		}
		total += len(b)
	}
	return total, nil
}

// measureSliceSizes returns the slice sizes of the inventory's node in each variant.
func measureSliceSizes(inv *discovery.Inventory, variants []Variant) ([]SliceSize, error) {
	var out []SliceSize
	for _, v := range variants {
		slices, res, err := v.build(inv, "node-0000")
		if err != nil {
			return nil, err
		}
		n, err := sliceBytes(slices)
		if err != nil {
			return nil, err
		}
		out = append(out, SliceSize{Variant: v, Slices: len(slices), Devices: len(res.Devices), Bytes: n})
	}
	return out, nil
}

// DeviceClasses returns the DeviceClasses the chart's default RdmaPools turn into: the
// pools are read from the rendered static manifest and their CEL comes from the
// controller's PoolCEL, so that the allocator selects devices exactly as on a cluster.
func DeviceClasses(repo string) (map[string]*resourceapi.DeviceClass, error) {
	path := filepath.Join(repo, "deployments", "static", "rdma-dra-driver.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read device pools: %w", err)
	}
	out := map[string]*resourceapi.DeviceClass{}
	for _, doc := range strings.Split(string(data), "\n---") {
		if !strings.Contains(doc, "\nkind: RdmaPool") {
			continue
		}
		var pool v1alpha1.RdmaPool
		if err := yaml.Unmarshal([]byte(doc), &pool); err != nil {
			return nil, fmt.Errorf("decode RdmaPool in %s: %w", path, err)
		}
		expr, err := controller.PoolCEL(devicemodel.DefaultDriverName, &pool.Spec)
		if err != nil {
			return nil, fmt.Errorf("CEL of pool %s: %w", pool.Name, err)
		}
		out[pool.Name] = &resourceapi.DeviceClass{
			ObjectMeta: metav1.ObjectMeta{Name: pool.Name},
			Spec:       resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}},
		}
	}
	if out[sharedClass] == nil {
		return nil, fmt.Errorf("%s has no RdmaPool %s", path, sharedClass)
	}
	return out, nil
}

// sharedClass is the DeviceClass of one-share claims.
const sharedClass = "rdma-shared"

// toPtrs returns pointers to the slices' elements.
func toPtrs(items []resourceapi.ResourceSlice) []*resourceapi.ResourceSlice {
	out := make([]*resourceapi.ResourceSlice, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

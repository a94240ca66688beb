package controller

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// The mock profiles' inventories are discovered once per test binary: writing a tree
// and scanning it is the slow part, and the result never changes.
var (
	inventoriesMu sync.Mutex
	inventories   = map[string]*discovery.Inventory{}
)

// profileInventory writes a mock node profile to disk and discovers it with the real
// discovery code.
func profileInventory(t *testing.T, profile string) *discovery.Inventory {
	t.Helper()
	inventoriesMu.Lock()
	defer inventoriesMu.Unlock()
	if inv, ok := inventories[profile]; ok {
		return inv
	}
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatalf("write profile %s: %v", profile, err)
	}
	inv, err := discovery.New(discovery.Options{SysfsRoot: filepath.Join(dir, mocknode.SysDir)}).Discover(context.Background())
	if err != nil {
		t.Fatalf("discover profile %s: %v", profile, err)
	}
	inventories[profile] = inv
	return inv
}

// profileSlices builds the ResourceSlices a node of the profile publishes, with the
// plugin's own device model.
func profileSlices(t *testing.T, profile, node string, legacy bool) []*resourceapi.ResourceSlice {
	t.Helper()
	opts := devicemodel.Options{NodeName: node, Legacy: legacy}
	if legacy {
		opts.Config.Legacy.Mode = nodeconfig.LegacyModeShared
		opts.Config.Legacy.Shares = 2
	}
	return buildSlices(t, profile, opts)
}

// legacyResourceSlices builds the ResourceSlices of a node of the profile whose node
// configuration has these legacyResources, in the default device model.
func legacyResourceSlices(t *testing.T, profile, node string, resources ...nodeconfig.LegacyResource) []*resourceapi.ResourceSlice {
	t.Helper()
	opts := devicemodel.Options{NodeName: node}
	opts.Config.LegacyResources = resources
	opts.Config.SetDefaults()
	if errs := opts.Config.Validate(); len(errs) > 0 {
		t.Fatalf("node configuration: %v", errs.ToAggregate())
	}
	return buildSlices(t, profile, opts)
}

func buildSlices(t *testing.T, profile string, opts devicemodel.Options) []*resourceapi.ResourceSlice {
	t.Helper()
	res, err := devicemodel.Build(profileInventory(t, profile), opts)
	if err != nil {
		t.Fatalf("build device model of %s: %v", profile, err)
	}
	return res.ResourceSlices()
}

// legacyDevice is the device a node publishes for the legacy pool called pool, as the
// kubelet plugin describes it: it stands for ports ports, and up to maxPods claims hold
// it at once (its rdma.dra.io/shares). Attribute names are on the wire, without the
// driver's domain.
func legacyDevice(pool string, ports, maxPods int64) resourceapi.Device {
	one := apiresource.MustParse("1")
	return resourceapi.Device{
		Name: v1alpha1.LegacyDeviceName(pool),
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			"mode":            {StringValue: ptr.To(string(v1alpha1.PoolModeLegacy))},
			"legacy_resource": {StringValue: ptr.To(pool)},
			"ports":           {IntValue: ptr.To(ports)},
			"link_layer":      {StringValue: ptr.To("InfiniBand")},
			"rdma_netns":      {StringValue: ptr.To("shared")},
		},
		Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{devicemodel.SharesCapacity: {
			Value: *apiresource.NewQuantity(maxPods, apiresource.DecimalSI),
			RequestPolicy: &resourceapi.CapacityRequestPolicy{Default: &one,
				ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: &one, Max: apiresource.NewQuantity(maxPods, apiresource.DecimalSI)}},
		}},
		AllowMultipleAllocations: ptr.To(true),
	}
}

// legacySlice is a further slice of the node's resource pool, the one of profileSlices,
// with the devices of its legacy pools.
func legacySlice(node string, devices ...resourceapi.Device) *resourceapi.ResourceSlice {
	return &resourceapi.ResourceSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "legacy-rdma.dra.io-" + node},
		Spec: resourceapi.ResourceSliceSpec{
			Driver:   devicemodel.DefaultDriverName,
			NodeName: ptr.To(node),
			Pool:     resourceapi.ResourcePool{Name: devicemodel.DefaultPoolName(node, devicemodel.DefaultDriverName), Generation: 1, ResourceSliceCount: 1},
			Devices:  devices,
		},
	}
}

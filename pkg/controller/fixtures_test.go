package controller

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

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
	res, err := devicemodel.Build(profileInventory(t, profile), opts)
	if err != nil {
		t.Fatalf("build device model of %s: %v", profile, err)
	}
	return res.ResourceSlices()
}

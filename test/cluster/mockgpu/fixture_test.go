package mockgpu

import (
	"path/filepath"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// PCI IDs of the fixture's functions.
const (
	vendorNV       = 0x10de
	vendorMellanox = 0x15b3
	deviceH100     = 0x2330
	deviceCX7      = 0x1021
	deviceUnknown  = 0x9999
	class3D        = 0x030200
	classVGA       = 0x030000
	classIB        = 0x020700
	classBridge    = 0x068000
)

// fixtureFunctions is a node in the shape of a GPU server: two H100s behind switches of
// their own, a ConnectX-7 next to the first, an NVIDIA function that is not a display
// controller, and a GPU whose device ID and NUMA node are unknown. Listed out of bus
// order on purpose.
func fixtureFunctions() []mocknode.PCIFunction {
	return []mocknode.PCIFunction{
		{Address: "0000:9a:00.0", Root: "pci0000:97", Bridges: []string{"0000:97:01.0", "0000:98:00.0"}, Vendor: vendorNV, Device: deviceH100, Class: class3D, NUMANode: 1, Driver: "nvidia"},
		{Address: "0000:1b:00.0", Root: "pci0000:18", Bridges: []string{"0000:18:01.0", "0000:19:00.0"}, Vendor: vendorNV, Device: deviceH100, Class: class3D, NUMANode: 0, Driver: "nvidia"},
		{Address: "0000:1a:00.0", Root: "pci0000:18", Bridges: []string{"0000:18:01.0", "0000:19:01.0"}, Vendor: vendorMellanox, Device: deviceCX7, Class: classIB, NUMANode: 0, Driver: "mlx5_core"},
		{Address: "0000:05:00.0", Root: "pci0000:00", Vendor: vendorNV, Device: 0x22a3, Class: classBridge, NUMANode: 0},
		{Address: "0001:c0:00.0", Root: "pci0001:c0", Vendor: vendorNV, Device: deviceUnknown, Class: classVGA, NUMANode: -1},
	}
}

// fixtureGPUs are the GPUs of fixtureFunctions, in bus order.
func fixtureGPUs() []GPU {
	return []GPU{
		{Name: "gpu-0", Index: 0, BusID: "0000:1b:00.0", PCIeRoot: "pci0000:18", DeviceID: "2330", NUMANode: ptr.To(0)},
		{Name: "gpu-1", Index: 1, BusID: "0000:9a:00.0", PCIeRoot: "pci0000:97", DeviceID: "2330", NUMANode: ptr.To(1)},
		{Name: "gpu-2", Index: 2, BusID: "0001:c0:00.0", PCIeRoot: "pci0001:c0", DeviceID: "9999"},
	}
}

// writeNode writes a mock node of fns with pkg/mocknode, the writer of the local
// cluster's trees, and returns its sysfs root.
func writeNode(t *testing.T, fns []mocknode.PCIFunction) string {
	t.Helper()
	dir := t.TempDir()
	n := mocknode.Node{PCIFunctions: fns}
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatalf("write mock node: %v", err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

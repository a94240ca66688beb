// Package mockgpu is a second DRA driver for the local cluster: it publishes the GPUs of a
// mock sysfs tree as devices of the driver gpu.mock.rdma.dra.io and prepares claims for
// them with a CDI spec that only sets environment variables. It exists so that claims on
// the local cluster can pair a GPU with an RDMA port (matchAttribute
// resource.kubernetes.io/pcieRoot) as they do on a GPU server. It is test tooling of the
// test/ module and never ships; docs/local-cluster.md ("Mock GPUs") describes it.
//
// A GPU is a PCI function linked from bus/pci/devices/<bus ID> whose vendor is NVIDIA
// (0x10de) and whose class is a display controller (0x03xxxx). GPUs are named gpu-<i>
// in bus order, so the same tree always gives the same devices.
package mockgpu

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// DriverName is the DRA driver name, the domain of the driver's attributes and the CDI
// vendor of its specs. The local cluster's DeviceClass has the same name.
const DriverName = "gpu.mock.rdma.dra.io"

// Attributes of a published GPU besides the standard resource.kubernetes.io/pcieRoot and
// resource.kubernetes.io/pciBusID.
const (
	// AttrIndex is the GPU's position in bus order, the i of gpu-<i>.
	AttrIndex resourceapi.QualifiedName = DriverName + "/index"
	// AttrNUMANode is the function's numa_node; left out when the tree says -1.
	AttrNUMANode resourceapi.QualifiedName = DriverName + "/numa_node"
	// AttrModel is the product name of the PCI device ID (H100, GB300), see Model.
	AttrModel resourceapi.QualifiedName = DriverName + "/model"
)

// vendorNVIDIA is the PCI vendor ID of every GPU this driver publishes.
const vendorNVIDIA = "10de"

// classDisplay is the PCI base class of display controllers (VGA 0x0300, 3D 0x0302).
const classDisplay = 0x03

// pciDevices is the directory of links to every PCI function, relative to the sysfs root.
const pciDevices = "bus/pci/devices"

// GPU is one GPU of the node, as read from the sysfs tree.
type GPU struct {
	// Name is the device name in the ResourceSlice: gpu-<Index>.
	Name string
	// Index is the GPU's position among the node's GPUs in bus order, from 0.
	Index int
	// BusID is the PCI address, e.g. 0000:1b:00.0.
	BusID string
	// PCIeRoot is the root complex the function sits below, e.g. pci0000:1a.
	PCIeRoot string
	// DeviceID is the PCI device ID in four lower-case hex digits, e.g. 2330.
	DeviceID string
	// NUMANode is the function's NUMA node; nil when the tree does not know it.
	NUMANode *int
}

// Model is the product name of the GPU's device ID, or "10de:<device ID>" for an ID the
// table does not know.
func (g GPU) Model() string {
	if m, ok := models[g.DeviceID]; ok {
		return m
	}
	return vendorNVIDIA + ":" + g.DeviceID
}

// models names the device IDs of the data-center GPUs that mock nodes carry (pci.ids;
// the Blackwell IDs from lspci output of such machines).
var models = map[string]string{
	"20b0": "A100", // GA100 [A100 SXM4 40GB]
	"20b2": "A100", // GA100 [A100 SXM4 80GB]
	"2330": "H100", // GH100 [H100 SXM5 80GB]
	"2331": "H100", // GH100 [H100 PCIe]
	"2335": "H200", // GH100 [H200 SXM 141GB]
	"2901": "B200", // GB100 [B200]
	"2941": "GB200",
	"3182": "B300", // GB110 [B300 SXM6 AC]
	"31c2": "GB300",
}

// Discover returns the GPUs of the sysfs tree below root, in bus order. A tree without
// bus/pci/devices has no GPUs. Every function's vendor is read; of NVIDIA functions also
// class, device and numa_node, and an unreadable or malformed file is an error that names
// it, so that a broken fixture is not published as a node without GPUs.
func Discover(root string) ([]GPU, error) {
	f, err := sysfs.Open(root)
	if err != nil {
		return nil, err
	}
	busIDs, err := f.ReadDirNames(pciDevices)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list PCI functions: %w", err)
	}
	// Fixed-width lower-case bus IDs sort like their numeric values: bus order.
	slices.Sort(busIDs)
	var gpus []GPU
	for _, busID := range busIDs {
		g, ok, err := readGPU(f, root, busID)
		if err != nil {
			return nil, fmt.Errorf("PCI function %s: %w", busID, err)
		}
		if !ok {
			continue
		}
		g.Index = len(gpus)
		g.Name = "gpu-" + strconv.Itoa(g.Index)
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// readGPU reads the function busID; ok is false when it is not a GPU.
func readGPU(f *sysfs.FS, root, busID string) (g GPU, ok bool, err error) {
	dir := pciDevices + "/" + busID
	vendor, err := sysfs.Read(f, dir+"/vendor", sysfs.ParsePCIID)
	if err != nil {
		return GPU{}, false, err
	}
	if vendor != vendorNVIDIA {
		return GPU{}, false, nil
	}
	class, err := sysfs.Read(f, dir+"/class", sysfs.ParsePCIClass)
	if err != nil {
		return GPU{}, false, err
	}
	if class>>16 != classDisplay {
		return GPU{}, false, nil // an NVIDIA bridge, NVSwitch or audio function
	}
	g = GPU{BusID: busID}
	if g.DeviceID, err = sysfs.Read(f, dir+"/device", sysfs.ParsePCIID); err != nil {
		return GPU{}, false, err
	}
	// The upstream helper for the standard attribute: the element after devices/ of the
	// link's target, which is what the RDMA driver's discovery publishes for its ports.
	attr, err := deviceattribute.GetPCIeRootAttributeByPCIBusID(busID, deviceattribute.WithFSFromRoot(root))
	if err != nil {
		return GPU{}, false, err
	}
	g.PCIeRoot = *attr.Value.StringValue
	switch s, err := f.ReadString(dir + "/numa_node"); {
	case errors.Is(err, fs.ErrNotExist):
		// No NUMA information at all: like -1.
	case err != nil:
		return GPU{}, false, err
	default:
		node, known, err := sysfs.ParseNUMANode(s)
		if err != nil {
			return GPU{}, false, fmt.Errorf("parse %s/numa_node: %w", dir, err)
		}
		if known {
			g.NUMANode = &node
		}
	}
	return g, true, nil
}

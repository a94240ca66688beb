package discovery

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// Data Direct (sysfs.md, "Data Direct"). A ConnectX-8 (and later) adapter may expose a
// second PCI function, 15b3:2100, through which its DMA to and from memory goes: it sits
// on the accelerator's side of the PCIe topology, so its root complex, not the PF's, is
// the one a GPU must share. The kernel pairs it with the adapter's RDMA devices by a
// VUID that only the firmware tells of the NIC side; from sysfs alone the pairing is
// rdma-core's rdma_topo's: the Data Direct function and the adapter's PFs carry the same
// UUID, keyword V3 of their VPD's read-only section.
const (
	// DeviceDataDirect is the PCI device ID of a Data Direct function (vendor 15b3).
	DeviceDataDirect = "2100"
	// vpdUUID is the VPD keyword NVIDIA adapters write their card UUID under.
	vpdUUID = "V3"
	// pciDevices lists every PCI function by bus ID.
	pciDevices = "bus/pci/devices/"
)

// dataDirectAdapters are the PF device IDs (vendor 15b3) of adapters that can have a
// Data Direct function: ConnectX-8 and ConnectX-9, as rdma_topo lists them. A node
// without one is not searched at all.
var dataDirectAdapters = map[string]bool{"1023": true, "1025": true}

// DataDirect is one Data Direct PCI function.
type DataDirect struct {
	// BusID is its PCI address, e.g. 0009:03:00.0.
	BusID string
	// PCIeRoot is its root complex, e.g. pci0009:00.
	PCIeRoot string
	// Driver is the driver it is bound to, empty when unbound. The kernel uses the
	// function only while the mlx5 driver has it (mlx5_ib in 6.12, which registers it
	// under its own name); vfio-pci means it belongs to a VM.
	Driver string
}

// ReadDataDirect reads the PCI function busID below the root of f as a Data Direct
// function. It fails when there is no such function or it is not 15b3:2100. Discovery
// calls it for every Data Direct function it finds; code that takes the pairing from
// elsewhere (a node's configuration) can check a bus ID with it.
func ReadDataDirect(f *sysfs.FS, busID string) (DataDirect, error) {
	link := pciDevices + busID
	fn, err := f.Resolve(link)
	if err != nil {
		return DataDirect{}, fmt.Errorf("read Data Direct function %s: %w", busID, err)
	}
	root, id, err := splitPCIPath(fn)
	if err != nil || id != busID {
		return DataDirect{}, fmt.Errorf("read Data Direct function %s: %w", busID, &pathError{path: fn, want: "devices/pci<domain>:<bus>/…/" + busID})
	}
	vendor, err := sysfs.Read(f, fn+"/vendor", sysfs.ParsePCIID)
	if err != nil {
		return DataDirect{}, fmt.Errorf("read Data Direct function %s: %w", busID, err)
	}
	device, err := sysfs.Read(f, fn+"/device", sysfs.ParsePCIID)
	if err != nil {
		return DataDirect{}, fmt.Errorf("read Data Direct function %s: %w", busID, err)
	}
	if vendor != VendorMellanox || device != DeviceDataDirect {
		return DataDirect{}, fmt.Errorf("read Data Direct function %s: it is %s:%s, not %s:%s", busID, vendor, device, VendorMellanox, DeviceDataDirect)
	}
	d := DataDirect{BusID: busID, PCIeRoot: root}
	d.Driver, _ = f.LinkBase(fn + "/driver") // no link: unbound
	return d, nil
}

// ReadVPDUUID returns the UUID (VPD keyword V3) of the PCI function busID. The vpd file
// is readable by root only; its absence is an error that wraps fs.ErrNotExist.
func ReadVPDUUID(f *sysfs.FS, busID string) (string, error) {
	name := pciDevices + busID + "/vpd"
	b, err := f.ReadBytes(name)
	if err != nil {
		return "", fmt.Errorf("read VPD of %s: %w", busID, err)
	}
	v, err := sysfs.ParseVPD(b)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", name, err)
	}
	uuid, ok := v.Keyword(vpdUUID)
	if !ok || uuid == "" {
		return "", fmt.Errorf("parse %s: no %s keyword in its read-only section", name, vpdUUID)
	}
	return uuid, nil
}

// dataDirect fills DataDirectBusID and DataDirectPCIeRoot of every port whose PCI
// function is the PF of an adapter in dataDirectAdapters, by the VPD UUID shared with
// exactly one bound Data Direct function. Two Data Direct functions with the PF's UUID
// leave it unknown: which one the kernel bound cannot be told from sysfs.
func (s *scan) dataDirect(ports []Port) {
	pfs := map[string][]int{}
	for i, p := range ports {
		if p.VendorID == VendorMellanox && dataDirectAdapters[p.DeviceID] && !p.SRIOVVF && p.PCIBusID != "" {
			pfs[p.PCIBusID] = append(pfs[p.PCIBusID], i)
		}
	}
	if len(pfs) == 0 {
		return
	}
	byUUID := s.dataDirectFunctions()
	if len(byUUID) == 0 {
		return
	}
	// In order, so that what is logged does not depend on map order.
	for _, pf := range slices.Sorted(maps.Keys(pfs)) {
		uuid, err := ReadVPDUUID(s.fs, pf)
		if err != nil {
			s.unknown(pf+" Data Direct function", err)
			continue
		}
		dds := byUUID[uuid]
		if len(dds) > 1 {
			ids := make([]string, len(dds))
			for i, d := range dds {
				ids[i] = d.BusID
			}
			s.unknown(pf+" Data Direct function", fmt.Errorf("%s share its VPD UUID %s: the one the kernel bound cannot be told from sysfs", strings.Join(ids, " and "), uuid))
			continue
		}
		if len(dds) == 1 {
			for _, i := range pfs[pf] {
				ports[i].DataDirectBusID, ports[i].DataDirectPCIeRoot = dds[0].BusID, dds[0].PCIeRoot
			}
		}
	}
}

// dataDirectFunctions returns the node's bound Data Direct functions by VPD UUID. A
// function whose VPD cannot be read is logged and left out.
func (s *scan) dataDirectFunctions() map[string][]DataDirect {
	names, err := s.fs.ReadDirNames(strings.TrimSuffix(pciDevices, "/"))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.unknown(pciDevices, err)
		}
		return nil
	}
	out := map[string][]DataDirect{}
	for _, name := range names {
		dir := pciDevices + name
		if !isBusID(name) {
			continue
		}
		if v, ok := readOptional(s, dir+"/vendor", sysfs.ParsePCIID); !ok || v != VendorMellanox {
			continue
		}
		if d, ok := readOptional(s, dir+"/device", sysfs.ParsePCIID); !ok || d != DeviceDataDirect {
			continue
		}
		dd, err := ReadDataDirect(s.fs, name)
		if err != nil {
			s.unknown(dir, err)
			continue
		}
		if dd.Driver == "" || dd.Driver == "vfio-pci" {
			continue // not the host kernel's to use
		}
		uuid, err := ReadVPDUUID(s.fs, name)
		if err != nil {
			s.unknown(dir+" VPD", err)
			continue
		}
		out[uuid] = append(out[uuid], dd)
	}
	return out
}

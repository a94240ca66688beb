package discovery

import (
	"path"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// device returns the ports of one RDMA device. Facts of the device and of its PCI function
// are read once and copied into each port.
func (s *scan) device(ibdev string, chars *charIndex) []Port {
	if _, err := sysfs.ParseDeviceName(ibdev); err != nil {
		s.unknown("class/infiniband entry", err)
		return nil
	}
	dir := "class/infiniband/" + ibdev
	portNames, err := s.fs.ReadDirNames(dir + "/ports")
	if err != nil {
		s.unknown(dir+" ports", err)
		return nil
	}

	base := Port{IBDev: ibdev}
	base.NodeGUID, _ = read(s, dir+"/node_guid", sysfs.ParseGUID)
	base.FWVer, _ = read(s, dir+"/fw_ver", text)
	base.BoardID, _ = readOptional(s, dir+"/board_id", text)
	base.HCAType, _ = readOptional(s, dir+"/hca_type", text)
	nodeType, nodeTypeOK := read(s, dir+"/node_type", sysfs.ParseNodeType)

	var parent string
	if s.fs.Lexists(dir + "/device") {
		s.pciFunction(&base, dir+"/device")
	} else {
		// Devices without a PCI function (soft-RoCE, soft-iWARP) run over a netdev.
		base.Virtual = true
		parent, _ = read(s, dir+"/parent", sysfs.ParseIfName)
		base.Model = virtualModel(nodeType, nodeTypeOK)
	}
	base.LAG = isHardwareLAG(ibdev)
	if v, ok := chars.verbs[ibdev]; ok {
		base.Verbs = &v
	}

	var ports []Port
	for _, num := range portNumbers(portNames) {
		p := base
		if base.Verbs != nil {
			v := *base.Verbs // each port owns its copy, so a consumer may change it freely
			p.Verbs = &v
		}
		p.Port = num
		s.port(&p, dir, parent)
		key := madKey{ibdev: ibdev, port: num}
		if c, ok := chars.umad[key]; ok {
			p.UMAD = &c
		}
		if c, ok := chars.issm[key]; ok {
			p.ISSM = &c
		}
		ports = append(ports, p)
	}
	return ports
}

// isHardwareLAG reports whether ibdev is a device the mlx5 driver made of a bond of its
// ports (mlx5_bond_0): one RDMA device whose single port's netdev is the bond.
func isHardwareLAG(ibdev string) bool {
	_, n, ok := strings.Cut(ibdev, "_bond_")
	if !ok {
		return false
	}
	_, err := sysfs.ParseDecimal(n)
	return err == nil
}

// pciFunction fills the facts of the PCI function that link points to.
func (s *scan) pciFunction(p *Port, link string) {
	fn, err := s.fs.Resolve(link)
	if err != nil {
		s.unknown(link+" PCI function", err)
		return
	}
	if root, busID, err := splitPCIPath(fn); err == nil {
		p.PCIeRoot, p.PCIBusID = root, busID
	} else {
		s.unknown(link+" PCI address", err)
	}
	p.VendorID, _ = read(s, fn+"/vendor", sysfs.ParsePCIID)
	p.DeviceID, _ = read(s, fn+"/device", sysfs.ParsePCIID)
	if node, ok := read(s, fn+"/numa_node", numaNode); ok && node >= 0 {
		p.NUMANode = &node
	}
	if drv, err := s.fs.LinkBase(fn + "/driver"); err == nil {
		p.Driver = drv
	} else {
		s.unknown(fn+" driver", err)
	}
	pfModel := ""
	if s.fs.Lexists(fn + "/physfn") {
		p.SRIOVVF = true
		if pf, err := s.fs.Resolve(fn + "/physfn"); err == nil && isBusID(path.Base(pf)) {
			p.PhysFn = path.Base(pf)
			pfModel = s.pfModel(pf, p.VendorID)
		} else if err != nil {
			s.unknown(fn+" physical function", err)
		}
	}
	p.Model = modelName(p.VendorID, p.DeviceID, pfModel)
}

// splitPCIPath returns the PCIe root complex and the bus ID of the PCI function at the
// canonical path fn, e.g. devices/pci0000:00/0000:00:01.0/0000:03:00.0: the component
// after devices/ is the root complex, the last one the function's bus ID.
func splitPCIPath(fn string) (root, busID string, err error) {
	parts := strings.Split(fn, "/")
	if len(parts) >= 3 && parts[0] == "devices" && strings.HasPrefix(parts[1], "pci") && isBusID(parts[len(parts)-1]) {
		return parts[1], parts[len(parts)-1], nil
	}
	return "", "", &pathError{path: fn, want: "devices/pci<domain>:<bus>/…/<bus ID>"}
}

// numaNode folds numa_node's "unknown" (-1) into a negative node.
func numaNode(s string) (int, error) {
	n, ok, err := sysfs.ParseNUMANode(s)
	if err != nil || !ok {
		return -1, err
	}
	return n, nil
}

// isBusID reports whether s is a PCI address as sysfs names functions: 0000:03:00.0.
func isBusID(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i, c := range []byte(s) {
		if i == 4 || i == 7 || i == 10 {
			continue
		}
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return s[11] <= '7'
}

// pathError says that a resolved path does not have the shape the layout promises.
type pathError struct{ path, want string }

func (e *pathError) Error() string { return "unexpected path " + e.path + ", want " + e.want }

// pfModel returns the model of the PF at the canonical path pf, reading its device ID
// once per scan: a PF may have hundreds of VFs.
func (s *scan) pfModel(pf, vendor string) string {
	s.mu.Lock()
	m, ok := s.pfModels[pf]
	s.mu.Unlock()
	if ok {
		return m
	}
	// Two workers may read the same PF at once; both compute the same name.
	if dev, ok := read(s, pf+"/device", sysfs.ParsePCIID); ok {
		m = modelName(vendor, dev, "")
	}
	s.mu.Lock()
	s.pfModels[pf] = m
	s.mu.Unlock()
	return m
}

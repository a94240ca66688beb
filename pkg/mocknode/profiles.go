package mocknode

import (
	"fmt"
	"sort"
	"strings"
)

// Profile is a named, realistic mock node.
type Profile struct {
	// Name is what --profile takes, e.g. dgx-h100.
	Name string
	// Description is one line for listings.
	Description string
	build       func() *Node
}

// Node returns a fresh description of the profile's node; callers may modify it.
func (p Profile) Node() *Node { return p.build() }

// profiles is the one list of profiles; Profiles sorts it.
var profiles = []Profile{
	{Name: "dgx-h100", Description: "8 ConnectX-7 NDR InfiniBand ports over 8 PCIe roots and 2 NUMA nodes, each beside an H100 GPU (proprietary driver, nvidia_peermem), plus a dual-port ConnectX-7 RoCE card for storage", build: dgxH100},
	{Name: "gb200", Description: "shaped like a GB200 NVL72 compute tray: 4 ConnectX-7 NDR InfiniBand ports over 4 PCI domains, plus a dual-port BlueField-3 in an 802.3ad bond (bond0, hardware LAG mlx5_bond_0) whose slaves share its MAC", build: gb200},
	{Name: "gb300", Description: "shaped like a GB300 NVL72 compute tray: 4 ConnectX-8 XDR InfiniBand ports, each with a Data Direct function on the PCIe root of its GB300 GPU (open kernel modules: gpudirect dmabuf), plus a BlueField-3 bond (bond0, hardware LAG) for storage", build: gb300},
	{Name: "mixed-bond", Description: "4 ConnectX-7 InfiniBand ports plus two ConnectX-6 Dx RoCE ports in one software bond (bond0)", build: mixedBond},
	{Name: "roce-lag", Description: "8 dual-port ConnectX-7 Ethernet cards in hardware LAG: mlx5_bond_0..7, one port each on bond0..7", build: roceLAG},
	{Name: "disabled-port", Description: "4 ConnectX-7 InfiniBand ports, one of them DOWN/Disabled", build: disabledPort},
	{Name: "vpi-dual-port", Description: "a dual-port ConnectX-3 Pro VPI adapter: port 1 InfiniBand FDR, port 2 40GbE RoCE with an IPv6-only GID table", build: vpiDualPort},
	{Name: "sriov", Description: "a ConnectX-6 Dx RoCE PF with 16 VFs, each VF its own RDMA device (IPv4, IPv6, link-local-only and sparse GID tables)", build: sriov},
	{Name: "soft-roce", Description: "soft-RoCE rxe0 over a virtio-net interface: a virtual RDMA device without a PCI function", build: softRoCE},
	{Name: "intel-e810", Description: "a dual-port Intel E810-C with irdma RoCE: RoCE v2 only, no MAD devices, one port with link-local GIDs only", build: intelE810},
	{Name: "broadcom", Description: "a dual-port Broadcom BCM57508 with bnxt_re RoCE: a sparse GID table and an IPv6-only port", build: broadcom},
	{Name: "large", Description: "64 ConnectX-7 ports (32 InfiniBand, 32 RoCE) and 256 VFs over 2 PCI domains, for benchmarks", build: large},
}

// Profiles returns every profile, sorted by name.
func Profiles() []Profile {
	out := append([]Profile(nil), profiles...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup returns the profile called name; the error of an unknown name lists the known
// ones.
func Lookup(name string) (Profile, error) {
	for _, p := range profiles {
		if p.Name == name {
			return p, nil
		}
	}
	names := make([]string, 0, len(profiles))
	for _, p := range Profiles() {
		names = append(names, p.Name)
	}
	return Profile{}, fmt.Errorf("unknown profile %q, known profiles: %s", name, strings.Join(names, ", "))
}

// PCI IDs, as listed in the PCI ID repository (hwdata pci.ids).
const (
	vendorMellanox = 0x15b3
	vendorIntel    = 0x8086
	vendorBroadcom = 0x14e4
	vendorRedHat   = 0x1af4

	deviceConnectX3Pro = 0x1007 // MT27520 Family [ConnectX-3 Pro]
	deviceConnectX6Dx  = 0x101d // MT2892 Family [ConnectX-6 Dx]
	deviceMlx5VF       = 0x101e // ConnectX Family mlx5Gen Virtual Function
	deviceConnectX7    = 0x1021 // MT2910 Family [ConnectX-7]
	deviceBlueField3   = 0xa2dc // MT43244 BlueField-3 integrated ConnectX-7 network controller
	deviceE810CQSFP    = 0x1592 // Ethernet Controller E810-C for QSFP
	deviceBCM57508     = 0x1750 // BCM57508 NetXtreme-E 10Gb/25Gb/40Gb/50Gb/100Gb/200Gb Ethernet
	deviceVirtioNet    = 0x1041 // Virtio 1.0 network device
	deviceH100SXM5     = 0x2330 // GH100 [H100 SXM5 80GB]

	classEthernet   = 0x020000
	classInfiniBand = 0x020700
	classNetOther   = 0x028000 // what VPI adapters such as the ConnectX-3 report
)

// Firmware and board facts of the adapters the profiles use. mlx5 reports hca_type as
// MT followed by the PCI device ID in decimal.
const (
	fwConnectX7   = "28.39.1002"
	fwConnectX6Dx = "22.39.1002"
	fwBlueField3  = "32.39.1002"
	boardDGXCX7   = "NVD0000000054"
	boardCX7Eth   = "MT_0000000838"
	boardCX6Dx    = "MT_0000000359"
	boardBF3      = "MT_0000000884"
)

// The NVIDIA driver's modules as a node loads them (sysfs.md, GPUDirect RDMA): the
// proprietary driver taints P (and O, out of tree), its open kernel modules only O; the
// version is illustrative.
var (
	moduleNVIDIAProprietary = KernelModule{Name: "nvidia", Taint: "PO", Version: nvidiaDriverVersion}
	moduleNVIDIAOpen        = KernelModule{Name: "nvidia", Taint: "O", Version: nvidiaDriverVersion}
	moduleNVIDIAPeermem     = KernelModule{Name: "nvidia_peermem", Taint: "O", Version: nvidiaDriverVersion}
)

const nvidiaDriverVersion = "580.82.07"

// gpu is an NVIDIA GPU bound to the nvidia driver, with its model's link.
func gpu(addr, root string, bridges []string, numa int, device, subsys uint16) GPU {
	return GPU{Address: addr, Root: root, Bridges: bridges, Device: device, SubsystemDevice: subsys, NUMANode: numa, Driver: "nvidia", Link: gpuLinks[device]}
}

// function returns an mlx5 PCI function with its model's link; callers adjust what
// differs.
func function(addr, root string, bridges []string, numa int, device, subsys uint16, class uint32) PCIFunction {
	return PCIFunction{
		Address: addr, Root: root, Bridges: bridges, NUMANode: numa,
		Vendor: vendorMellanox, Device: device, SubsystemVendor: vendorMellanox, SubsystemDevice: subsys,
		Class: class, Driver: "mlx5_core", Link: mlx5Links[device],
	}
}

// ibPort is an ACTIVE InfiniBand NDR port on the default subnet.
func ibPort(portGUID uint64, lid uint16) Port {
	return Port{
		Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "400 Gb/sec (4X NDR)", LinkLayer: "InfiniBand",
		LID: lid, SMLID: 0x1, PKeys: []uint16{0xffff, 0x8001},
		GIDs: []GID{{Index: 0, GID: LinkLocalGID(portGUID), Type: GIDTypeRoCEv1}},
	}
}

// rocePort is an ACTIVE Ethernet port with the given GID table.
func rocePort(number int, rate string, gids []GID) Port {
	return Port{Number: number, State: "ACTIVE", PhysState: "LinkUp", Rate: rate, LinkLayer: "Ethernet", GIDs: gids}
}

// ipoib is the IPoIB interface of port dev_port+1 of a function.
func ipoib(name, pci string, portGUID uint64, devPort int) Netdev {
	return Netdev{
		Name: name, PCI: pci, Address: IPoIBAddress(0x1049, portGUID), MTU: 4092,
		OperState: "up", Type: NetdevTypeInfiniBand, DevPort: devPort,
	}
}

// ether is an Ethernet interface of a function.
func ether(name, pci string, mac uint64, mtu, devPort int) Netdev {
	return Netdev{Name: name, PCI: pci, Address: MAC(mac), MTU: mtu, OperState: "up", Type: NetdevTypeEthernet, DevPort: devPort}
}

// bond is a bonding master; its slaves name it as their Master.
func bond(name string, mac uint64, mtu int) Netdev {
	return Netdev{Name: name, Address: MAC(mac), MTU: mtu, OperState: "up", Type: NetdevTypeEthernet, Bond: true}
}

// mlx5 is an mlx5 RDMA device whose node and system image GUIDs are guid.
func mlx5(name, pci string, guid uint64, fw, board string, device uint16, ports ...Port) RDMADevice {
	return RDMADevice{
		Name: name, PCI: pci, NodeGUID: GUID(guid), SysImageGUID: GUID(guid), FWVer: fw,
		BoardID: board, HCAType: fmt.Sprintf("MT%d", device), Ports: ports,
	}
}

// bdf formats a PCI bus ID.
func bdf(domain, bus, dev, fn int) string {
	return fmt.Sprintf("%04x:%02x:%02x.%d", domain, bus, dev, fn)
}

// switchPath is a root with a root port and a PCIe switch (upstream and one downstream
// port) in front of a card, as GPU servers put NICs next to GPUs: the card sits on bus
// rootBus+3.
func switchPath(domain, rootBus int) (root string, bridges []string, cardBus int) {
	return fmt.Sprintf("pci%04x:%02x", domain, rootBus),
		[]string{bdf(domain, rootBus, 1, 0), bdf(domain, rootBus+1, 0, 0), bdf(domain, rootBus+2, 0, 0)},
		rootBus + 3
}

// ifname is the systemd predictable name of a function's interface: en/ib, P<domain>
// when not 0, p<bus>s<slot>, then suffix (f0np0, d1, v3 ...).
func ifname(prefix, addr, suffix string) string {
	var domain, bus, slot, fn int
	if _, err := fmt.Sscanf(addr, "%x:%x:%x.%x", &domain, &bus, &slot, &fn); err != nil {
		panic(fmt.Sprintf("mocknode: profile address %q: %v", addr, err))
	}
	name := prefix
	if domain != 0 {
		name += fmt.Sprintf("P%d", domain)
	}
	return name + fmt.Sprintf("p%ds%d", bus, slot) + suffix
}

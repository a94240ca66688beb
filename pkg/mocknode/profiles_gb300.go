package mocknode

import "fmt"

// Facts of the ConnectX-8 SuperNIC and the GB300 as gb300 uses them. The device IDs are
// the PCI ID repository's (15b3:1023 "CX8 Family [ConnectX-8]") and the kernel's
// (15b3:2100, drivers/infiniband/hw/mlx5/data_direct.c: "ConnectX-8 Data Direct"); the
// GB300's, 10de:31c2 with subsystem 10de:21f1, is from the supported-GPU list of NVIDIA's
// open GPU kernel modules. Firmware, board ID, serial numbers and UUIDs are illustrative.
const (
	deviceConnectX8  = 0x1023
	deviceConnectX9  = 0x1025 // the other adapter with a Data Direct function (rdma-core's rdma_topo)
	deviceDataDirect = 0x2100
	deviceGB300      = 0x31c2
	fwConnectX8      = "40.45.1200"
	boardCX8         = "NVD0000000091"
	// classDataDirect is what the mock gives the Data Direct function; discovery does
	// not read it.
	classDataDirect = 0x020000
)

// gb300 is shaped like a compute tray of a GB300 NVL72: two Grace sockets, each PCIe root
// a PCI domain of its own; four ConnectX-8 SuperNICs, XDR InfiniBand at 800 Gb/s, one per
// Blackwell Ultra GPU, two per socket (two per mezzanine board, which shares its serial
// number, not its UUID). Each CX8's PF sits on a Grace root complex; its Data Direct
// function, through which its DMA goes, sits on the root complex of its GPU, behind the
// CX8's own PCIe switch: NVIDIA's topology for GB300, PF 0000:03:00.0 with Data Direct
// 0009:03:00.0 and GPU 0009:06:00.0. The NVIDIA driver is the open kernel modules, so
// dma-buf works without nvidia_peermem. A dual-port BlueField-3 in hardware LAG serves
// storage and the north-south network, as on gb200.
// Expected: mlx5_0..3 InfiniBand 800 Gb/s on ibp3s0, ibP2p3s0, ibP16p3s0, ibP18p3s0
// (NUMA 0, 0, 1, 1), PCIe roots pci0000:00, pci0002:00, pci0010:00, pci0012:00; Data
// Direct 0009:03:00.0, 0008:03:00.0, 0019:03:00.0, 0018:03:00.0 on pci0009:00,
// pci0008:00, pci0019:00, pci0018:00, the roots of GPUs 0009:06:00.0, 0008:06:00.0,
// 0019:06:00.0, 0018:06:00.0; mlx5_bond_0 Ethernet 200 Gb/s on bond0, GID index 3; every
// port gpudirect dmabuf.
func gb300() *Node {
	n := &Node{KernelModules: []KernelModule{moduleNVIDIAOpen}, Platform: twoSockets(cpuGrace, switchConnectX8)}
	for i, dom := range [][2]int{{0x0, 0x9}, {0x2, 0x8}, {0x10, 0x19}, {0x12, 0x18}} {
		cx8WithDataDirect(n, fmt.Sprintf("mlx5_%d", i), dom[0], dom[1], i/2, i, uint16(0x310+i))
	}
	bf3Bond(n, 0x6, 0x58a2e1070300, 0x58a2e10300070300, "10.60.0.31")
	return n
}

// cx8WithDataDirect adds one ConnectX-8 SuperNIC: its InfiniBand PF on bus 3 of PCI
// domain pfDomain, its IPoIB interface, and in PCI domain gpuDomain, behind the CX8's
// switch, its Data Direct function on bus 3 and the GPU on bus 6, one switch further
// down. The PF and the Data Direct function share the VPD UUID that pairs them.
func cx8WithDataDirect(n *Node, ibdev string, pfDomain, gpuDomain, numa, index int, lid uint16) {
	root, bridges, bus := switchPath(pfDomain, 0)
	addr := bdf(pfDomain, bus, 0, 0)
	guid := 0x7c8c090300c80000 + uint64(index)<<8
	serial := fmt.Sprintf("MT2512X%05d", 1000+index/2)
	uuid := fmt.Sprintf("8f3c1d2e6a7b4c5d9e0f%012x", 0xc80000+index)
	vpd := func(fn int) *VPD {
		return &VPD{ProductName: "NVIDIA ConnectX-8 C8240 HHHL SuperNIC, 800Gbs XDR IB", PartNumber: "900-9X81E-00EX-ST0",
			SerialNumber: serial, UUID: uuid, FunctionID: fmt.Sprintf("%sMLNXS%dD0F%d", serial, index%2, fn)}
	}
	pf := function(addr, root, bridges, numa, deviceConnectX8, 0x0071, classInfiniBand)
	pf.VPD = vpd(0)
	n.PCIFunctions = append(n.PCIFunctions, pf)
	n.Netdevs = append(n.Netdevs, ipoib(ifname("ib", addr, ""), addr, guid, 0))
	port := ibPort(guid, lid)
	port.Rate = "800 Gb/sec (4X XDR)"
	n.RDMADevices = append(n.RDMADevices, mlx5(ibdev, addr, guid, fwConnectX8, boardCX8, deviceConnectX8, port))

	// The GPU's domain: Grace root port, the CX8 switch's upstream port, a downstream
	// port to the Data Direct function, and another to a second switch above the GPU.
	// Every switch port has the ConnectX-8 bridge's IDs (the platform's switch); the
	// root port is the kind Grace has on its GPUs' domains.
	gpuRoot := fmt.Sprintf("pci%04x:00", gpuDomain)
	rp, usp := bdf(gpuDomain, 0, 0, 0), bdf(gpuDomain, 1, 0, 0)
	gpuRootPort := cpuGrace.RootPort
	gpuRootPort.Device = deviceGraceGPURootPort
	n.Platform.Bridges = append(n.Platform.Bridges, Bridge{Address: rp, BridgeModel: gpuRootPort})
	dd := function(bdf(gpuDomain, 3, 0, 0), gpuRoot, []string{rp, usp, bdf(gpuDomain, 2, 0, 0)}, numa, deviceDataDirect, 0x0071, classDataDirect)
	dd.Driver, dd.VPD = "mlx5_ib", vpd(1)
	n.PCIFunctions = append(n.PCIFunctions, dd)
	n.GPUs = append(n.GPUs, gpu(bdf(gpuDomain, 6, 0, 0), gpuRoot,
		[]string{rp, usp, bdf(gpuDomain, 2, 1, 0), bdf(gpuDomain, 4, 0, 0), bdf(gpuDomain, 5, 0, 0)}, numa, deviceGB300, 0x21f1))
}

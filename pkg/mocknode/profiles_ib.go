package mocknode

import "fmt"

// cx7IB adds one single-function ConnectX-7 InfiniBand card (an OSFP NDR port) behind its
// own PCIe switch in PCI domain 0, with its IPoIB interface, as GPU servers attach one
// NIC per GPU.
func cx7IB(n *Node, ibdev string, rootBus, numa int, guid uint64, lid uint16) {
	cx7IBIn(n, ibdev, 0, rootBus, numa, guid, lid)
}

// cx7IBIn is cx7IB in the given PCI domain.
func cx7IBIn(n *Node, ibdev string, domain, rootBus, numa int, guid uint64, lid uint16) {
	root, bridges, bus := switchPath(domain, rootBus)
	addr := bdf(domain, bus, 0, 0)
	n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, numa, deviceConnectX7, 0x0041, classInfiniBand))
	n.Netdevs = append(n.Netdevs, ipoib(ifname("ib", addr, ""), addr, guid, 0))
	n.RDMADevices = append(n.RDMADevices, mlx5(ibdev, addr, guid, fwConnectX7, boardDGXCX7, deviceConnectX7, ibPort(guid, lid)))
}

// dualPortRoCE adds a dual-port Ethernet card (two functions, one mlx5 device each, one
// system image GUID) whose ports carry the GID tables gids(fn, netdev, linkLocal).
func dualPortRoCE(n *Node, ibdevs [2]string, root string, bridges []string, bus, numa int, device, subsys uint16,
	fw, board, rate string, mac, guid uint64, mtu int, gids func(fn int, netdev string, linkLocal uint64) []GID,
) {
	for fn := range 2 {
		addr := bdf(0, bus, 0, fn)
		fmac := mac + uint64(fn)
		nd := ifname("en", addr, fmt.Sprintf("f%dnp%d", fn, fn))
		n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, numa, device, subsys, classEthernet))
		n.Netdevs = append(n.Netdevs, ether(nd, addr, fmac, mtu, 0))
		d := mlx5(ibdevs[fn], addr, guid+uint64(fn), fw, board, device, rocePort(1, rate, gids(fn, nd, MACToGUID(fmac))))
		d.SysImageGUID = GUID(guid)
		n.RDMADevices = append(n.RDMADevices, d)
	}
}

// dgxH100 is shaped like an NVIDIA DGX H100: eight NDR compute ports, one per GPU, each on
// its own PCIe root (four per CPU socket) behind the PCIe switch its H100 SXM5 sits
// behind too, and a dual-port 200GbE card for storage. The NVIDIA driver is the
// proprietary one, with nvidia_peermem.
// Expected: mlx5_0..7 InfiniBand 400 Gb/s on ibp24s0...ibp220s0, no GID index;
// mlx5_8/mlx5_9 Ethernet 200 Gb/s on enp168s0f0np0/enp168s0f1np1, GID index 3; every
// port gpudirect peermem; GPUs 0000:1b:00.0 ... 0000:df:00.0 on the InfiniBand ports'
// roots pci0000:15 ... pci0000:d9.
func dgxH100() *Node {
	n := &Node{KernelModules: []KernelModule{moduleNVIDIAProprietary, moduleNVIDIAPeermem}, Platform: twoSockets(cpuSapphireRapids, switchPEX890xx)}
	cardBuses := []int{0x18, 0x40, 0x4f, 0x5e, 0x9a, 0xc0, 0xce, 0xdc}
	for i, bus := range cardBuses {
		cx7IB(n, fmt.Sprintf("mlx5_%d", i), bus-3, i/4, 0xa088c2030056d2a0+uint64(i)*0x10, uint16(0x1a0+i))
		// The GPU hangs off another downstream port of the NIC's switch, three buses on,
		// where a DGX H100 has it.
		root, bridges, _ := switchPath(0, bus-3)
		bridges[len(bridges)-1] = bdf(0, bus-1, 1, 0)
		n.GPUs = append(n.GPUs, gpu(bdf(0, bus+3, 0, 0), root, bridges, i/4, deviceH100SXM5, 0x16c1))
	}
	dualPortRoCE(n, [2]string{"mlx5_8", "mlx5_9"}, "pci0000:a7", []string{"0000:a7:01.0"}, 0xa8, 1,
		deviceConnectX7, 0x0027, fwConnectX7, boardCX7Eth, "200 Gb/sec (4X HDR)", 0xa088c2a81e40, 0xa088c20300a81e40, 9000,
		func(fn int, nd string, ll uint64) []GID {
			return RoCEGIDs(nd, LinkLocalGID(ll), fmt.Sprintf("10.200.%d.11", fn))
		})
	return n
}

// mixedBond has InfiniBand compute ports and two RoCE ports of a ConnectX-6 Dx in one
// 802.3ad software bond: the kernel moves their GIDs to bond0.
// Expected: mlx5_0..3 InfiniBand; mlx5_4 and mlx5_5 Ethernet on netdev bond0 (MTU 9000),
// LAG, GID index 3.
func mixedBond() *Node {
	n := &Node{Platform: twoSockets(cpuSapphireRapids, switchPEX890xx)}
	for i, rootBus := range []int{0x15, 0x27, 0x97, 0xa8} {
		cx7IB(n, fmt.Sprintf("mlx5_%d", i), rootBus, i/2, 0x946dae03008e5c10+uint64(i)*0x10, uint16(0x40+i))
	}
	const mac = 0x946dae5e0a00
	n.Netdevs = append(n.Netdevs, bond("bond0", mac, 9000))
	dualPortRoCE(n, [2]string{"mlx5_4", "mlx5_5"}, "pci0000:5d", []string{"0000:5d:01.0"}, 0x5e, 0,
		deviceConnectX6Dx, 0x0016, fwConnectX6Dx, boardCX6Dx, "100 Gb/sec (4X EDR)", mac, 0x946dae03005e0a00, 9000,
		func(int, string, uint64) []GID {
			return RoCEGIDs("bond0", LinkLocalGID(MACToGUID(mac)), "10.10.0.7")
		})
	for i := range n.Netdevs {
		if n.Netdevs[i].PCI != "" && n.Netdevs[i].Type == NetdevTypeEthernet {
			n.Netdevs[i].Master = "bond0"
		}
	}
	return n
}

// gb200 is shaped like a compute tray of a GB200 NVL72: two Grace sockets, each PCIe root
// a PCI domain of its own; four ConnectX-7 NDR compute ports, one per Blackwell GPU, two
// per socket; and a dual-port BlueField-3 (in NIC mode) for the north-south network, its
// two ports in an 802.3ad bond with hardware LAG. As in every 802.3ad bond, both slaves
// have the bond's MAC, the first slave's: the tree has one MAC on three netdevs, which
// the local cluster's stand-ins must take as they are.
// Expected: mlx5_0..3 InfiniBand 400 Gb/s on ibp3s0, ibP2p3s0, ibP16p3s0, ibP18p3s0 (NUMA
// 0, 0, 1, 1), no GID index; mlx5_bond_0 Ethernet 200 Gb/s on bond0 (MTU 9000,
// 10.60.0.21), LAG, GID index 3, PCIe root pci0006:00; bond0, enP6p3s0f0np0 and
// enP6p3s0f1np1 all 58:a2:e1:06:03:00.
func gb200() *Node {
	n := &Node{Platform: twoSockets(cpuGrace, switchConnectX7)}
	for i, domain := range []int{0x0, 0x2, 0x10, 0x12} {
		cx7IBIn(n, fmt.Sprintf("mlx5_%d", i), domain, 0, i/2, 0x58a2e10300b10000+uint64(domain)<<8, uint16(0x210+i))
	}
	bf3Bond(n, 0x6, 0x58a2e1060300, 0x58a2e10300060300, "10.60.0.21")
	return n
}

// bf3Bond adds a dual-port BlueField-3 (in NIC mode) on its own PCI domain for the
// north-south network, its two ports in an 802.3ad bond0 with hardware LAG: the second
// PF gives up its RDMA device, mlx5_bond_0 on the first drives both ports, and the kernel
// gives its GIDs (ip among them) to the bond. Both slaves have the bond's MAC. The switch
// in front of the PFs is the BlueField-3's own; n must have a platform.
func bf3Bond(n *Node, domain int, mac, guid uint64, ip string) {
	root, bridges, bus := switchPath(domain, 0)
	for _, b := range bridges[1:] {
		n.Platform.Bridges = append(n.Platform.Bridges, Bridge{Address: b, BridgeModel: switchBlueField3})
	}
	n.Netdevs = append(n.Netdevs, bond("bond0", mac, 9000))
	for fn := range 2 {
		addr := bdf(domain, bus, 0, fn)
		n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, 0, deviceBlueField3, 0x0051, classEthernet))
		slave := ether(ifname("en", addr, fmt.Sprintf("f%dnp%d", fn, fn)), addr, mac, 9000, 0)
		slave.Master = "bond0"
		n.Netdevs = append(n.Netdevs, slave)
	}
	n.RDMADevices = append(n.RDMADevices, mlx5("mlx5_bond_0", bdf(domain, bus, 0, 0), guid, fwBlueField3, boardBF3, deviceBlueField3,
		rocePort(1, "200 Gb/sec (4X HDR)", RoCEGIDs("bond0", LinkLocalGID(MACToGUID(mac)), ip))))
}

// disabledPort has four InfiniBand ports of which mlx5_2's is administratively disabled.
// Expected: mlx5_2 port 1 DOWN/Disabled (its IPoIB interface ibp154s0 down), the others
// ACTIVE/LinkUp.
func disabledPort() *Node {
	n := &Node{Platform: twoSockets(cpuSapphireRapids, switchPEX890xx)}
	for i, rootBus := range []int{0x15, 0x3d, 0x97, 0xbd} {
		cx7IB(n, fmt.Sprintf("mlx5_%d", i), rootBus, i/2, 0x7c8c090300c3cf00+uint64(i)*0x10, uint16(0x538+i))
	}
	p := &n.RDMADevices[2].Ports[0]
	p.State, p.PhysState, p.Rate, p.LID, p.SMLID = "DOWN", "Disabled", "10 Gb/sec (4X SDR)", 0, 0
	n.Netdevs[2].OperState = "down"
	return n
}

// vpiDualPort is a ConnectX-3 Pro VPI adapter (mlx4): one PCI function, one RDMA device,
// two ports of different link layers.
// Expected: mlx4_0 port 1 InfiniBand 56 Gb/s on ibp5s0 (dev_port 0); port 2 Ethernet
// 40 Gb/s on enp5s0d1 (dev_port 1), GID index 3 from a global IPv6 address (no IPv4).
func vpiDualPort() *Node {
	const (
		addr = "0000:05:00.0"
		guid = 0xf4521403007be1a0
		mac  = 0xf452147be1a1
	)
	f := function(addr, "pci0000:00", []string{"0000:00:03.0"}, 0, deviceConnectX3Pro, 0x0006, classNetOther)
	f.Driver = "mlx4_core"
	ib := ibPort(guid+1, 0x3)
	ib.Rate = "56 Gb/sec (4X FDR)"
	eth := rocePort(2, "40 Gb/sec (4X QDR)", RoCEGIDs("enp5s0d1", LinkLocalGID(MACToGUID(mac)), "2001:db8:5::7"))
	dev := RDMADevice{
		Name: "mlx4_0", PCI: addr, NodeGUID: GUID(guid), SysImageGUID: GUID(guid + 3),
		FWVer: "2.42.5000", BoardID: "MT_1090111023", HCAType: "MT4103", Ports: []Port{ib, eth},
	}
	return &Node{
		PCIFunctions: []PCIFunction{f},
		Netdevs: []Netdev{
			ipoib("ibp5s0", addr, guid+1, 0),
			ether("enp5s0d1", addr, mac, 1500, 1),
		},
		RDMADevices: []RDMADevice{dev},
		Platform:    twoSockets(cpuBroadwell, noSwitch),
	}
}

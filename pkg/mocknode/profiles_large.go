package mocknode

import "fmt"

// large has 64 single-port ConnectX-7 cards (32 InfiniBand, 32 Ethernet with 8 VFs each)
// over two PCI domains: 320 ports, enough to show how discovery, the device model and
// prepare scale, and to use the dynamic device numbers above uverbs31 and umad63.
// Expected: mlx5_0..31 InfiniBand, mlx5_32..63 Ethernet PFs (GID index 3), mlx5_64..319
// VFs (GID index 3), NUMA node = PCI domain.
func large() *Node {
	n := &Node{Platform: twoSockets(cpuSapphireRapids, switchPEX890xx)}
	vfIndex := 64
	var vfs []RDMADevice
	for card := range 64 {
		domain := card / 32
		rootBus := 0x20 * ((card % 32) / 4)
		root := fmt.Sprintf("pci%04x:%02x", domain, rootBus)
		down := card % 4
		bridges := []string{bdf(domain, rootBus, 1, 0), bdf(domain, rootBus+1, 0, 0), bdf(domain, rootBus+2, down, 0)}
		bus := rootBus + 3 + down
		addr := bdf(domain, bus, 0, 0)
		guid := 0xb83fd20300000000 + uint64(card)<<8
		if card < 32 {
			n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, domain, deviceConnectX7, 0x0041, classInfiniBand))
			n.Netdevs = append(n.Netdevs, ipoib(ifname("ib", addr, ""), addr, guid, 0))
			n.RDMADevices = append(n.RDMADevices, mlx5(fmt.Sprintf("mlx5_%d", card), addr, guid, fwConnectX7, boardDGXCX7,
				deviceConnectX7, ibPort(guid, uint16(0x100+card))))
			continue
		}
		mac := 0xb83fd2000000 + uint64(card)<<8
		nd := ifname("en", addr, "f0np0")
		n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, domain, deviceConnectX7, 0x0027, classEthernet))
		n.Netdevs = append(n.Netdevs, ether(nd, addr, mac, 9000, 0))
		n.RDMADevices = append(n.RDMADevices, mlx5(fmt.Sprintf("mlx5_%d", card), addr, guid, fwConnectX7, boardCX7Eth,
			deviceConnectX7, rocePort(1, "400 Gb/sec (4X NDR)", RoCEGIDs(nd, LinkLocalGID(MACToGUID(mac)), fmt.Sprintf("10.%d.%d.1", 64+domain, card)))))
		for k := range 8 {
			vfAddr := bdf(domain, bus, (1+k)/8, (1+k)%8)
			vf := function(vfAddr, "", nil, domain, deviceMlx5VF, 0x0027, classEthernet)
			vf.PhysFn, vf.Link = addr, mlx5Links[deviceConnectX7]
			vmac := mac + 0x10 + uint64(k)
			vnd := ifname("en", addr, fmt.Sprintf("f0v%d", k))
			n.PCIFunctions = append(n.PCIFunctions, vf)
			n.Netdevs = append(n.Netdevs, ether(vnd, vfAddr, vmac, 9000, 0))
			vfs = append(vfs, mlx5(fmt.Sprintf("mlx5_%d", vfIndex), vfAddr, guid+0x10+uint64(k), fwConnectX7, boardCX7Eth, deviceMlx5VF,
				rocePort(1, "400 Gb/sec (4X NDR)", RoCEGIDs(vnd, LinkLocalGID(MACToGUID(vmac)), fmt.Sprintf("10.%d.%d.%d", 64+domain, card, 10+k)))))
			vfIndex++
		}
	}
	// VFs register after every PF has probed, so they come last.
	n.RDMADevices = append(n.RDMADevices, vfs...)
	// Short GID tables keep the tree (some 20000 entries) quick to write.
	for i := range n.RDMADevices {
		n.RDMADevices[i].Ports[0].GIDTableSize = 8
	}
	return n
}

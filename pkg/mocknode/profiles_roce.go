package mocknode

import "fmt"

// roceLAG has eight dual-port ConnectX-7 Ethernet cards, each bonded in hardware LAG: the
// second PF gives up its RDMA device and mlx5_bond_N on the first PF drives both ports.
// Expected: mlx5_bond_0..7, one Ethernet port each, netdev bond0..7 (MTU 9000), LAG,
// 400 Gb/s, GID index 3.
func roceLAG() *Node {
	n := &Node{Platform: twoSockets(cpuSapphireRapids, switchPEX890xx)}
	for i, rootBus := range []int{0x15, 0x3d, 0x4c, 0x5b, 0x97, 0xbd, 0xcb, 0xd9} {
		root, bridges, bus := switchPath(0, rootBus)
		mac := 0x5c25730a0000 + uint64(bus)<<8
		bondName := fmt.Sprintf("bond%d", i)
		n.Netdevs = append(n.Netdevs, bond(bondName, mac, 9000))
		for fn := range 2 {
			addr := bdf(0, bus, 0, fn)
			n.PCIFunctions = append(n.PCIFunctions, function(addr, root, bridges, i/4, deviceConnectX7, 0x0027, classEthernet))
			slave := ether(ifname("en", addr, fmt.Sprintf("f%dnp%d", fn, fn)), addr, mac+uint64(fn), 9000, 0)
			slave.Master = bondName
			n.Netdevs = append(n.Netdevs, slave)
		}
		guid := 0x5c25730300000000 + uint64(bus)<<8
		gids := RoCEGIDs(bondName, LinkLocalGID(MACToGUID(mac)), fmt.Sprintf("10.100.%d.5", i))
		n.RDMADevices = append(n.RDMADevices, mlx5(fmt.Sprintf("mlx5_bond_%d", i), bdf(0, bus, 0, 0), guid,
			fwConnectX7, boardCX7Eth, deviceConnectX7, rocePort(1, "400 Gb/sec (4X NDR)", gids)))
	}
	return n
}

// sriov is a ConnectX-6 Dx PF with 16 VFs; every VF is an RDMA device of its own.
// Expected: mlx5_0 (PF, enp59s0f0np0, GID index 3); mlx5_1..16 on VFs 0000:3b:00.2 to
// 0000:3b:02.1 with netdevs enp59s0f0v0..15, SR-IOV VF of 0000:3b:00.0. GID index: VFs
// 0-7 3 (IPv4), 8-11 none (link-local only), 12-14 3 (IPv6), 15 7 (sparse table, IPv4 at
// 6/7).
func sriov() *Node {
	const (
		pf     = "0000:3b:00.0"
		pfMAC  = 0x08c0eb3b0000
		pfGUID = 0x08c0eb03003b0000
	)
	root, bridges := "pci0000:3a", []string{"0000:3a:00.0"}
	n := &Node{
		Platform:     twoSockets(cpuIceLake, noSwitch),
		PCIFunctions: []PCIFunction{function(pf, root, bridges, 0, deviceConnectX6Dx, 0x0016, classEthernet)},
		Netdevs:      []Netdev{ether("enp59s0f0np0", pf, pfMAC, 9000, 0)},
		RDMADevices: []RDMADevice{mlx5("mlx5_0", pf, pfGUID, fwConnectX6Dx, boardCX6Dx, deviceConnectX6Dx,
			rocePort(1, "100 Gb/sec (4X EDR)", RoCEGIDs("enp59s0f0np0", LinkLocalGID(MACToGUID(pfMAC)), "10.1.0.10")))},
	}
	for k := range 16 {
		addr := bdf(0, 0x3b, (2+k)/8, (2+k)%8)
		vf := function(addr, "", nil, 0, deviceMlx5VF, 0x0016, classEthernet)
		vf.PhysFn, vf.Link = pf, n.PCIFunctions[0].Link
		mac := 0x02c0eb3b1000 + uint64(k)
		nd := fmt.Sprintf("enp59s0f0v%d", k)
		ll := LinkLocalGID(MACToGUID(mac))
		var gids []GID
		switch {
		case k < 8:
			gids = RoCEGIDs(nd, ll, fmt.Sprintf("10.1.0.%d", 100+k))
		case k < 12:
			gids = RoCEGIDs(nd, ll)
		case k < 15:
			gids = RoCEGIDs(nd, ll, fmt.Sprintf("2001:db8:1::%d", 100+k))
		default:
			// An address that was removed and re-added: its entries moved up the table.
			v4 := IPv4GID("10.1.0.115")
			gids = append(RoCEGIDs(nd, ll),
				GID{Index: 6, GID: v4, Type: GIDTypeRoCEv1, Ndev: nd},
				GID{Index: 7, GID: v4, Type: GIDTypeRoCEv2, Ndev: nd})
		}
		n.PCIFunctions = append(n.PCIFunctions, vf)
		n.Netdevs = append(n.Netdevs, ether(nd, addr, mac, 1500, 0))
		n.RDMADevices = append(n.RDMADevices, mlx5(fmt.Sprintf("mlx5_%d", k+1), addr, 0x02c0eb03003b1000+uint64(k),
			fwConnectX6Dx, boardCX6Dx, deviceMlx5VF, rocePort(1, "100 Gb/sec (4X EDR)", gids)))
	}
	return n
}

// softRoCE is a VM with soft-RoCE over virtio-net. virtio-net reports no link speed, so
// rxe falls back to 1X SDR.
// Expected: rxe0 port 1 Ethernet, virtual (no PCI function), netdev ens3 (its parent,
// MTU 1500), 2 Gb/s (2.5 truncated), GID index 3.
func softRoCE() *Node {
	const (
		addr = "0000:00:03.0"
		mac  = 0x525400123456
	)
	guid := MACToGUID(mac)
	return &Node{
		Platform: &Platform{CPU: cpuVM, Sockets: 1},
		// On the VM's root bus the device has no link of its own.
		PCIFunctions: []PCIFunction{{
			Address: addr, Root: "pci0000:00", Vendor: vendorRedHat, Device: deviceVirtioNet,
			SubsystemVendor: vendorRedHat, SubsystemDevice: 0x1100, Class: classEthernet, NUMANode: -1, Driver: "virtio-pci",
		}},
		Netdevs: []Netdev{{Name: "ens3", PCI: addr, SubDir: "virtio0", Address: MAC(mac), MTU: 1500, OperState: "up", Type: NetdevTypeEthernet}},
		RDMADevices: []RDMADevice{{
			Name: "rxe0", Parent: "ens3", NodeGUID: GUID(guid), SysImageGUID: GUID(guid),
			Ports: []Port{rocePort(1, "2.5 Gb/sec (1X SDR)", RoCEGIDs("ens3", LinkLocalGID(guid), "192.168.122.10"))},
		}},
	}
}

// intelE810 is an E810-C with the irdma driver: RoCE v2 only (no v1 entries), no MAD
// devices, no board_id or hca_type files.
// Expected: irdma0 on enp81s0f0 GID index 1; irdma1 on enp81s0f1 with link-local GIDs
// only, so no GID index; no umad/issm.
func intelE810() *Node {
	n := &Node{Platform: twoSockets(cpuIceLake, noSwitch)}
	for fn := range 2 {
		addr := bdf(0, 0x51, 0, fn)
		mac := 0x6cfe54510000 + uint64(fn)
		nd := fmt.Sprintf("enp81s0f%d", fn)
		n.PCIFunctions = append(n.PCIFunctions, PCIFunction{
			Address: addr, Root: "pci0000:50", Bridges: []string{"0000:50:01.0"}, Vendor: vendorIntel, Device: deviceE810CQSFP,
			SubsystemVendor: vendorIntel, SubsystemDevice: 0x0002, Class: classEthernet, NUMANode: 0, Driver: "ice", Link: linkGen4x16,
		})
		n.Netdevs = append(n.Netdevs, ether(nd, addr, mac, 9000, 0))
		gids := []GID{{Index: 0, GID: LinkLocalGID(MACToGUID(mac)), Type: GIDTypeRoCEv2, Ndev: nd}}
		if fn == 0 {
			gids = append(gids, GID{Index: 1, GID: IPv4GID("10.20.0.3"), Type: GIDTypeRoCEv2, Ndev: nd})
		}
		guid := MACToGUID(mac)
		n.RDMADevices = append(n.RDMADevices, RDMADevice{
			Name: fmt.Sprintf("irdma%d", fn), PCI: addr, NodeGUID: GUID(guid), SysImageGUID: GUID(guid),
			FWVer: "1.71", NoMAD: true, Ports: []Port{rocePort(1, "100 Gb/sec (4X EDR)", gids)},
		})
	}
	return n
}

// broadcom is a BCM57508 with bnxt_re.
// Expected: bnxt_re0 on enp65s0f0np0 GID index 5 (entries 2-4 unused, IPv4 at 4/5);
// bnxt_re1 on enp65s0f1np1 GID index 3 from a global IPv6 address.
func broadcom() *Node {
	n := &Node{Platform: twoSockets(cpuGenoa, noSwitch)}
	for fn := range 2 {
		addr := bdf(0, 0x41, 0, fn)
		mac := 0x00108641a000 + uint64(fn)
		nd := fmt.Sprintf("enp65s0f%dnp%d", fn, fn)
		ll := LinkLocalGID(MACToGUID(mac))
		gids := RoCEGIDs(nd, ll, "2001:db8:41::2")
		if fn == 0 {
			v4 := IPv4GID("10.30.0.8")
			gids = append(RoCEGIDs(nd, ll),
				GID{Index: 4, GID: v4, Type: GIDTypeRoCEv1, Ndev: nd},
				GID{Index: 5, GID: v4, Type: GIDTypeRoCEv2, Ndev: nd})
		}
		n.PCIFunctions = append(n.PCIFunctions, PCIFunction{
			Address: addr, Root: "pci0000:40", Bridges: []string{"0000:40:01.1"}, Vendor: vendorBroadcom, Device: deviceBCM57508,
			SubsystemVendor: vendorBroadcom, SubsystemDevice: 0x2100, Class: classEthernet, NUMANode: 1, Driver: "bnxt_en", Link: linkGen4x16,
		})
		n.Netdevs = append(n.Netdevs, ether(nd, addr, mac, 9000, 0))
		guid := MACToGUID(mac)
		n.RDMADevices = append(n.RDMADevices, RDMADevice{
			Name: fmt.Sprintf("bnxt_re%d", fn), PCI: addr, NodeGUID: GUID(guid), SysImageGUID: GUID(guid &^ 1),
			FWVer: "224.0.110.0", HCAType: "Broadcom NetXtreme-C/E RoCE Driver HCA",
			Ports: []Port{rocePort(1, "100 Gb/sec (4X EDR)", gids)},
		})
	}
	return n
}

package mocknode

// The platforms the profiles run on: their CPUs with the CPUs' PCIe root ports, their PCIe
// switches, and the links of the adapters and GPUs. PCI IDs are the PCI ID repository's
// (hwdata pci.ids), except Grace's root ports, which it does not list: 10de:22b2 and, on
// the PCI domains of a GB300 tray's GPUs, 10de:22b1, as the kernel of such a tray reports
// them. Cores, threads and sockets are those of the named parts; the CPU modaliases carry
// the vendor, family and model the kernel reports for them and an abridged feature list.
const (
	vendorBroadcomLSI = 0x1000 // Broadcom / LSI, whose PEX switches GPU servers use
	vendorAMD         = 0x1022

	deviceSPRRootPort      = 0x352a // PCI Express Gen5 Port A (Sapphire Rapids)
	deviceICXRootPort      = 0x347a // Ice Lake PCI Express Root Port A
	deviceBDXRootPort      = 0x6f08 // Xeon E7 v4/Xeon E5 v4/Xeon E3 v4/Xeon D PCI Express Root Port 3
	deviceGenoaGPPBridge   = 0x14ab // Genoa/Bergamo GPP Bridge
	deviceGraceRootPort    = 0x22b2
	deviceGraceGPURootPort = 0x22b1
	devicePEX890xx         = 0xc030 // PEX890xx PCIe Gen 5 Switch
	deviceConnectX7Bridge  = 0x1979 // MT2910 Family [ConnectX-7 PCIe Bridge]
	deviceBlueField3Bridge = 0x197b // MT43244 Family [BlueField-3 SoC PCIe Bridge]
	deviceConnectX8Bridge  = 0x197d // CX8 Family [ConnectX-8 PCIe Bridge]
)

// The PCIe links of the profiles' devices and bridges.
var (
	linkGen3x8  = Link{Gen: 3, Width: 8}
	linkGen3x16 = Link{Gen: 3, Width: 16}
	linkGen4x16 = Link{Gen: 4, Width: 16}
	linkGen5x16 = Link{Gen: 5, Width: 16}
	linkGen6x16 = Link{Gen: 6, Width: 16}
)

// mlx5Links are the links of NVIDIA's adapters by device ID, from their product briefs:
// ConnectX-3 Pro PCIe 3.0 x8, ConnectX-6 Dx 4.0 x16, ConnectX-7 and BlueField-3 5.0 x16,
// ConnectX-8 6.0 x16, its Data Direct function behind its own switch too. A VF (0x101e,
// every generation's) states its PF's link, which profiles copy.
var mlx5Links = map[uint16]Link{
	deviceConnectX3Pro: linkGen3x8,
	deviceConnectX6Dx:  linkGen4x16,
	deviceConnectX7:    linkGen5x16,
	deviceBlueField3:   linkGen5x16,
	deviceConnectX8:    linkGen6x16,
	deviceDataDirect:   linkGen6x16,
}

// gpuLinks are the links of NVIDIA's GPUs by device ID: H100 SXM5 PCIe 5.0 x16, GB300
// 6.0 x16.
var gpuLinks = map[uint16]Link{
	deviceH100SXM5: linkGen5x16,
	deviceGB300:    linkGen6x16,
}

// Abridged feature lists of the CPU modaliases; nothing reads them.
const (
	x86Features   = ":feature:,0000,0001,0002,0003,0004,0005,0006,0007,0008,0009,000B,000C,000D,000E,000F,0010,0011,0013,0015,0016,0017,0018,0019,001A,001B,001C,001D"
	arm64Features = ":feature:,0000,0001,0002,0003,0004,0005,0006,0007,0008,0009,000A,000B,000C,000D,000E,000F,0010,0011,0012,0013,0014,0015,0016,0017"
)

// The profiles' CPUs. The kernel's x86 vendor numbers are 0 for Intel and 2 for AMD.
var (
	// cpuSapphireRapids is a Xeon Platinum 8480C, the DGX H100's, with Gen5 root ports.
	cpuSapphireRapids = CPU{
		Modalias: "cpu:type:x86,ven0000fam0006mod008F" + x86Features, Cores: 56, Threads: 2,
		RootPort: BridgeModel{Vendor: vendorIntel, Device: deviceSPRRootPort, SubsystemVendor: vendorIntel, Link: linkGen5x16},
	}
	// cpuIceLake is a Xeon Platinum 8358 (Ice Lake-SP) with Gen4 root ports.
	cpuIceLake = CPU{
		Modalias: "cpu:type:x86,ven0000fam0006mod006A" + x86Features, Cores: 32, Threads: 2,
		RootPort: BridgeModel{Vendor: vendorIntel, Device: deviceICXRootPort, SubsystemVendor: vendorIntel, Link: linkGen4x16},
	}
	// cpuBroadwell is a Xeon E5-2680 v4 with Gen3 root ports, of the ConnectX-3's time.
	cpuBroadwell = CPU{
		Modalias: "cpu:type:x86,ven0000fam0006mod004F" + x86Features, Cores: 14, Threads: 2,
		RootPort: BridgeModel{Vendor: vendorIntel, Device: deviceBDXRootPort, SubsystemVendor: vendorIntel, Link: linkGen3x16},
	}
	// cpuGenoa is an AMD EPYC 9654 with Gen5 GPP bridges as root ports.
	cpuGenoa = CPU{
		Modalias: "cpu:type:x86,ven0002fam0019mod0011" + x86Features, Cores: 96, Threads: 2,
		RootPort: BridgeModel{Vendor: vendorAMD, Device: deviceGenoaGPPBridge, SubsystemVendor: vendorAMD, Link: linkGen5x16},
	}
	// cpuGrace is an NVIDIA Grace: 72 Neoverse V2 cores without SMT, Gen5 root ports.
	cpuGrace = CPU{
		Modalias: "cpu:type:aarch64" + arm64Features, Cores: 72, Threads: 1,
		RootPort: BridgeModel{Vendor: VendorNVIDIA, Device: deviceGraceRootPort, SubsystemVendor: VendorNVIDIA, Link: linkGen5x16},
	}
	// cpuVM is a virtual machine's 8 vCPUs on a Sapphire Rapids host (QEMU -cpu host). Its
	// devices sit on the root bus, without root ports.
	cpuVM = CPU{Modalias: "cpu:type:x86,ven0000fam0006mod008F" + x86Features, Cores: 8, Threads: 1}
)

// The profiles' PCIe switches.
var (
	switchPEX890xx = BridgeModel{Vendor: vendorBroadcomLSI, Device: devicePEX890xx, SubsystemVendor: vendorBroadcomLSI, Link: linkGen5x16}
	// switchConnectX7 and switchConnectX8 are the switches built into the adapters, in
	// front of the adapter and, on a GB300 tray, its GPU; switchBlueField3 likewise.
	switchConnectX7  = BridgeModel{Vendor: vendorMellanox, Device: deviceConnectX7Bridge, SubsystemVendor: vendorMellanox, Link: linkGen5x16}
	switchConnectX8  = BridgeModel{Vendor: vendorMellanox, Device: deviceConnectX8Bridge, SubsystemVendor: vendorMellanox, Link: linkGen6x16}
	switchBlueField3 = BridgeModel{Vendor: vendorMellanox, Device: deviceBlueField3Bridge, SubsystemVendor: vendorMellanox, Link: linkGen5x16}
)

// noSwitch is the switch of platforms whose paths hold root ports only.
var noSwitch BridgeModel

// twoSockets is a two-socket server of cpu whose switches are sw.
func twoSockets(cpu CPU, sw BridgeModel) *Platform {
	return &Platform{CPU: cpu, Sockets: 2, Switch: sw}
}

package discovery

import "github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"

// PCI vendor IDs of RDMA adapter makers, as VendorID spells them.
const (
	VendorMellanox = "15b3"
	VendorIntel    = "8086"
	VendorBroadcom = "14e4"
)

// models maps vendor:device PCI IDs to marketing names. It is the one place the project
// keeps them; the IDs are checked against the PCI ID repository (pci.ids).
var models = map[string]string{
	// NVIDIA (Mellanox) ConnectX and BlueField, mlx4 and mlx5.
	"15b3:1003": "ConnectX-3",
	"15b3:1004": "ConnectX-3 VF", // also the VF of the ConnectX-3 Pro
	"15b3:1007": "ConnectX-3 Pro",
	"15b3:1011": "Connect-IB",
	"15b3:1012": "Connect-IB VF",
	"15b3:1013": "ConnectX-4",
	"15b3:1014": "ConnectX-4 VF",
	"15b3:1015": "ConnectX-4 Lx",
	"15b3:1016": "ConnectX-4 Lx VF",
	"15b3:1017": "ConnectX-5",
	"15b3:1018": "ConnectX-5 VF",
	"15b3:1019": "ConnectX-5 Ex",
	"15b3:101a": "ConnectX-5 Ex VF",
	"15b3:101b": "ConnectX-6",
	"15b3:101c": "ConnectX-6 VF",
	"15b3:101d": "ConnectX-6 Dx",
	"15b3:101e": genericMlx5VF,
	"15b3:101f": "ConnectX-6 Lx",
	"15b3:1021": "ConnectX-7",
	"15b3:1023": "ConnectX-8",
	"15b3:a2d2": "BlueField",
	"15b3:a2d3": "BlueField VF",
	"15b3:a2d6": "BlueField-2",
	"15b3:a2d9": "BlueField-3 Lx",
	"15b3:a2dc": "BlueField-3",

	// Intel E810 (ice, RDMA through irdma).
	"8086:1591": "E810-C",
	"8086:1592": "E810-C",
	"8086:1593": "E810-C",
	"8086:1599": "E810-XXV",
	"8086:159a": "E810-XXV",
	"8086:159b": "E810-XXV",

	// Broadcom NetXtreme-C/E with RoCE (bnxt_en, RDMA through bnxt_re).
	"14e4:16c1": "NetXtreme-E VF",
	"14e4:16ce": "NetXtreme-C BCM57311",
	"14e4:16cf": "NetXtreme-C BCM57312",
	"14e4:16d6": "NetXtreme-E BCM57412",
	"14e4:16d7": "NetXtreme-E BCM57414",
	"14e4:16d8": "NetXtreme-E BCM57416",
	"14e4:16d9": "NetXtreme-E BCM57417",
	"14e4:16df": "NetXtreme-C BCM57314",
	"14e4:16e2": "NetXtreme-E BCM57417",
	"14e4:16e3": "NetXtreme-E BCM57416",
	"14e4:16e5": "NetXtreme-C VF",
	"14e4:16eb": "NetXtreme-E BCM57412",
	"14e4:16ed": "NetXtreme-E BCM57414",
	"14e4:16ef": "NetXtreme-E BCM57416",
	"14e4:1605": "NetXtreme-E BCM5745X",
	"14e4:1606": "NetXtreme-E BCM5745X VF",
	"14e4:1750": "NetXtreme-E BCM57508",
	"14e4:1751": "NetXtreme-E BCM57504",
	"14e4:1752": "NetXtreme-E BCM57502",
	"14e4:1803": "NetXtreme-E BCM57502",
	"14e4:1804": "NetXtreme-E BCM57504",
	"14e4:1805": "NetXtreme-E BCM57508",
	"14e4:1807": "NetXtreme-E BCM5750X VF",
	"14e4:1809": "NetXtreme-E BCM5750X VF",
}

// genericMlx5VF is the one device ID that the VFs of the ConnectX-6 Dx and Lx, ConnectX-7,
// ConnectX-8 and BlueField-2 and -3 share; the PF tells which adapter it is.
const genericMlx5VF = "ConnectX VF"

// modelName returns the marketing name of a PCI function, or "" for IDs not in the
// table. pfModel is the name of a VF's PF, if known: it names the generic mlx5 VF.
func modelName(vendor, device, pfModel string) string {
	m := models[vendor+":"+device]
	if m == genericMlx5VF && pfModel != "" && pfModel != genericMlx5VF {
		return pfModel + " VF"
	}
	return m
}

// Names of RDMA devices that have no PCI function.
const (
	ModelSoftRoCE  = "Soft-RoCE"
	ModelSoftIWARP = "Soft-iWARP"
)

// virtualModel tells soft-RoCE (rxe, a CA) from soft-iWARP (siw, an RNIC) by node type,
// which, unlike the user-chosen device name, the driver fixes.
func virtualModel(t sysfs.NodeType, ok bool) string {
	switch {
	case ok && t.Code == sysfs.NodeTypeRNIC:
		return ModelSoftIWARP
	case ok && t.Code == sysfs.NodeTypeCA:
		return ModelSoftRoCE
	}
	return ""
}

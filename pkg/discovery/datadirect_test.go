package discovery_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// ddNode has count ConnectX-8 InfiniBand PFs 000<2i>:03:00.0 (RDMA device mlx5_<i>), and
// per PF a Data Direct function 00<10+i>:03:00.0, bound to mlx5_ib, whose VPD has the
// PF's UUID, as a Grace-based tray lays them out: the PF on the CPU's root complex, the
// Data Direct function on the GPU's.
func ddNode(count int) *mocknode.Node {
	n := &mocknode.Node{}
	for i := range count {
		pf := fmt.Sprintf("%04x:03:00.0", 2*i)
		dd := fmt.Sprintf("%04x:03:00.0", 0x10+i)
		uuid := fmt.Sprintf("%032x", 0xc8000+i)
		vpd := func(fn int) *mocknode.VPD {
			return &mocknode.VPD{ProductName: "NVIDIA ConnectX-8 SuperNIC", SerialNumber: fmt.Sprintf("MT2510X0%04d", i), UUID: uuid,
				FunctionID: fmt.Sprintf("MT2510X0%04dMLNXS0D0F%d", i, fn)}
		}
		guid := uint64(0xa088c20300c80000) + uint64(i)<<8
		n.PCIFunctions = append(n.PCIFunctions,
			mocknode.PCIFunction{Address: pf, Root: fmt.Sprintf("pci%04x:00", 2*i), Bridges: []string{fmt.Sprintf("%04x:00:00.0", 2*i)},
				Vendor: 0x15b3, Device: 0x1023, Class: 0x020700, NUMANode: 0, Driver: "mlx5_core", VPD: vpd(0)},
			mocknode.PCIFunction{Address: dd, Root: fmt.Sprintf("pci%04x:00", 0x10+i), Bridges: []string{fmt.Sprintf("%04x:00:00.0", 0x10+i), fmt.Sprintf("%04x:01:00.0", 0x10+i)},
				Vendor: 0x15b3, Device: 0x2100, Class: 0x020000, NUMANode: 0, Driver: "mlx5_ib", VPD: vpd(1)})
		n.RDMADevices = append(n.RDMADevices, mocknode.RDMADevice{Name: fmt.Sprintf("mlx5_%d", i), PCI: pf, NodeGUID: mocknode.GUID(guid), SysImageGUID: mocknode.GUID(guid), FWVer: "40.45.1200",
			Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "800 Gb/sec (4X XDR)", LinkLayer: "InfiniBand", LID: uint16(0x10 + i), SMLID: 1}}})
	}
	return n
}

// TestDataDirectPairing changes one thing of a two-adapter node at a time and checks
// which ports get a Data Direct function, against both discovery and the node's
// restated expectation.
func TestDataDirectPairing(t *testing.T) {
	paired := map[string][2]string{"mlx5_0": {"0010:03:00.0", "pci0010:00"}, "mlx5_1": {"0011:03:00.0", "pci0011:00"}}
	tests := []struct {
		name   string
		edit   func(n *mocknode.Node)
		mutate func(t *testing.T, root string) // after writing
		want   map[string][2]string            // ibdev to DD bus ID and root; others none
		log    string                          // logged once when set
	}{
		{name: "each PF with its own", want: paired},
		{name: "PF without VPD", edit: func(n *mocknode.Node) { n.PCIFunctions[0].VPD = nil },
			want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}, log: "read VPD of 0000:03:00.0"},
		{name: "Data Direct function of another adapter", edit: func(n *mocknode.Node) { n.PCIFunctions[1].VPD.UUID = fmt.Sprintf("%032x", 0xbad) },
			want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}},
		{name: "two Data Direct functions with one UUID", edit: func(n *mocknode.Node) {
			n.PCIFunctions[3].VPD.UUID = n.PCIFunctions[1].VPD.UUID
		}, want: map[string][2]string{}, log: "0010:03:00.0 and 0011:03:00.0 share its VPD UUID"},
		{name: "unbound Data Direct function", edit: func(n *mocknode.Node) { n.PCIFunctions[1].Driver = "" },
			want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}},
		{name: "Data Direct function given to a VM", edit: func(n *mocknode.Node) { n.PCIFunctions[1].Driver = "vfio-pci" },
			want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}},
		{name: "a ConnectX-7 has none", edit: func(n *mocknode.Node) { n.PCIFunctions[0].Device = 0x1021 },
			want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}},
		{name: "Data Direct function without V3", edit: func(n *mocknode.Node) { n.PCIFunctions[3].VPD.UUID = "" },
			want: map[string][2]string{"mlx5_0": paired["mlx5_0"]}, log: "no V3 keyword"},
		{name: "truncated VPD of a Data Direct function", mutate: func(t *testing.T, root string) {
			writeFile(t, root, "bus/pci/devices/0010:03:00.0/vpd", "\x82\x40\x00NVIDIA")
		}, want: map[string][2]string{"mlx5_1": paired["mlx5_1"]}, log: "runs past the end of the data"},
		{name: "malformed VPD of a PF", mutate: func(t *testing.T, root string) {
			writeFile(t, root, "bus/pci/devices/0002:03:00.0/vpd", "\x90\x04\x00v3\x01x\x78")
		}, want: map[string][2]string{"mlx5_0": paired["mlx5_0"]}, log: "not two letters or digits"},
		{name: "a second PF of the same adapter shares it", edit: func(n *mocknode.Node) {
			f := n.PCIFunctions[0]
			f.Address, f.VPD = "0000:03:00.1", &mocknode.VPD{ProductName: f.VPD.ProductName, UUID: f.VPD.UUID}
			n.PCIFunctions = append(n.PCIFunctions, f)
			d := n.RDMADevices[0]
			d.Name, d.PCI, d.Ports = "mlx5_2", f.Address, []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "800 Gb/sec (4X XDR)", LinkLayer: "InfiniBand"}}
			n.RDMADevices = append(n.RDMADevices, d)
		}, want: map[string][2]string{"mlx5_0": paired["mlx5_0"], "mlx5_1": paired["mlx5_1"], "mlx5_2": paired["mlx5_0"]}},
		{name: "a VF has none", edit: func(n *mocknode.Node) {
			vf := mocknode.PCIFunction{Address: "0000:03:00.2", Vendor: 0x15b3, Device: 0x101e, Class: 0x020700, NUMANode: 0, Driver: "mlx5_core", PhysFn: "0000:03:00.0"}
			n.PCIFunctions = append(n.PCIFunctions, vf)
			n.RDMADevices = append(n.RDMADevices, mocknode.RDMADevice{Name: "mlx5_2", PCI: vf.Address, NodeGUID: mocknode.GUID(7), SysImageGUID: mocknode.GUID(7), FWVer: "40.45.1200",
				Ports: []mocknode.Port{{Number: 1, State: "ACTIVE", PhysState: "LinkUp", Rate: "800 Gb/sec (4X XDR)", LinkLayer: "InfiniBand"}}})
		}, want: paired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := ddNode(2)
			if tt.edit != nil {
				tt.edit(n)
			}
			root := writeNode(t, n)
			if tt.mutate != nil {
				tt.mutate(t, root)
			}
			var logs logLines
			inv, err := New(Options{SysfsRoot: root}).Discover(klog.NewContext(context.Background(), logs.logger()))
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range inv.Ports {
				if got := [2]string{p.DataDirectBusID, p.DataDirectPCIeRoot}; got != tt.want[p.IBDev] {
					t.Errorf("%s: Data Direct %v, want %v", p.IBDev, got, tt.want[p.IBDev])
				}
			}
			if tt.mutate == nil {
				// The description's own statement of the rule agrees.
				for _, e := range n.ExpectedPorts() {
					if got := [2]string{e.DataDirectBusID, e.DataDirectPCIeRoot}; got != tt.want[e.IBDev] {
						t.Errorf("expected %s: Data Direct %v, want %v", e.IBDev, got, tt.want[e.IBDev])
					}
				}
			}
			if tt.log != "" && logs.count(tt.log) != 1 {
				t.Errorf("log mentions %q %d times, want once:\n%s", tt.log, logs.count(tt.log), strings.Join(logs.lines, "\n"))
			}
		})
	}
}

func TestReadDataDirect(t *testing.T) {
	root := writeNode(t, ddNode(1))
	f, err := sysfs.Open(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ReadDataDirect(f, "0010:03:00.0")
	if want := (DataDirect{BusID: "0010:03:00.0", PCIeRoot: "pci0010:00", Driver: "mlx5_ib"}); err != nil || got != want {
		t.Errorf("ReadDataDirect = %+v, %v; want %+v", got, err, want)
	}
	for busID, wantErr := range map[string]string{
		"0000:03:00.0": "it is 15b3:1023, not 15b3:2100",
		"0000:09:00.0": "no such file",
	} {
		if _, err := ReadDataDirect(f, busID); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("ReadDataDirect(%s) error = %v, want %q", busID, err, wantErr)
		}
	}
	if uuid, err := ReadVPDUUID(f, "0000:03:00.0"); err != nil || uuid != fmt.Sprintf("%032x", 0xc8000) {
		t.Errorf("ReadVPDUUID = %q, %v", uuid, err)
	}
}

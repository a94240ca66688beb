package discovery_test

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// TestProfiles discovers every named mock node and compares each port with what the
// node's description implies, then checks the facts each profile was built to show.
func TestProfiles(t *testing.T) {
	type keyFacts struct {
		ports   int
		netns   NetnsMode
		models  map[string]string // ibdev -> model
		netdevs map[string]string // "ibdev/port" -> netdev
		// dataDirect maps "ibdev/port" to its Data Direct function and that one's root.
		dataDirect map[string][2]string
	}
	want := map[string]keyFacts{
		"dgx-h100": {ports: 10, netns: NetnsModeShared, models: map[string]string{"mlx5_0": "ConnectX-7"}},
		"gb200":    {ports: 5, models: map[string]string{"mlx5_0": "ConnectX-7", "mlx5_bond_0": "BlueField-3"}, netdevs: map[string]string{"mlx5_3/1": "ibP18p3s0", "mlx5_bond_0/1": "bond0"}},
		"gb300": {ports: 5, models: map[string]string{"mlx5_0": "ConnectX-8", "mlx5_bond_0": "BlueField-3"}, netdevs: map[string]string{"mlx5_3/1": "ibP18p3s0", "mlx5_bond_0/1": "bond0"},
			dataDirect: map[string][2]string{"mlx5_0/1": {"0009:03:00.0", "pci0009:00"}, "mlx5_3/1": {"0018:03:00.0", "pci0018:00"}, "mlx5_bond_0/1": {}}},
		"mixed-bond":    {ports: 6, models: map[string]string{"mlx5_0": "ConnectX-7"}},
		"roce-lag":      {ports: 8, models: map[string]string{"mlx5_bond_0": "ConnectX-7"}, netdevs: map[string]string{"mlx5_bond_0/1": "bond0", "mlx5_bond_7/1": "bond7"}},
		"disabled-port": {ports: 4},
		"vpi-dual-port": {ports: 2, models: map[string]string{"mlx4_0": "ConnectX-3 Pro"}},
		"sriov":         {ports: 17, models: map[string]string{"mlx5_0": "ConnectX-6 Dx"}},
		"soft-roce":     {ports: 1, models: map[string]string{"rxe0": ModelSoftRoCE}},
		"intel-e810":    {ports: 2, models: map[string]string{"irdma0": "E810-C"}},
		"broadcom":      {ports: 2, models: map[string]string{"bnxt_re0": "NetXtreme-E BCM57508"}},
		"large":         {ports: 64 + 256},
	}
	for _, prof := range mocknode.Profiles() {
		t.Run(prof.Name, func(t *testing.T) {
			n := prof.Node()
			inv := discover(t, writeNode(t, n))
			if diff := cmp.Diff(n.ExpectedPorts(), inv.Ports, cmpopts.IgnoreFields(Port{}, "Model")); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
			kf, ok := want[prof.Name]
			if !ok {
				t.Fatalf("profile %s has no key facts in this test", prof.Name)
			}
			if len(inv.Ports) != kf.ports {
				t.Errorf("%d ports, want %d", len(inv.Ports), kf.ports)
			}
			if kf.netns != "" && inv.NetnsMode != kf.netns {
				t.Errorf("netns mode %q, want %q", inv.NetnsMode, kf.netns)
			}
			byName := map[string]Port{}
			for _, p := range inv.Ports {
				byName[p.IBDev] = p
				if p.Model == "" {
					t.Errorf("%s/%d (%s:%s): no model", p.IBDev, p.Port, p.VendorID, p.DeviceID)
				}
			}
			for ibdev, m := range kf.models {
				if got := byName[ibdev].Model; got != m {
					t.Errorf("%s model %q, want %q", ibdev, got, m)
				}
			}
			for key, dd := range kf.dataDirect {
				if p := portByKey(inv.Ports, key); [2]string{p.DataDirectBusID, p.DataDirectPCIeRoot} != dd {
					t.Errorf("%s Data Direct %s on %s, want %v", key, p.DataDirectBusID, p.DataDirectPCIeRoot, dd)
				}
			}
			for key, nd := range kf.netdevs {
				if got := portByKey(inv.Ports, key).Netdev; got != nd {
					t.Errorf("%s netdev %q, want %q", key, got, nd)
				}
			}
		})
	}
}

func portByKey(ports []Port, key string) Port {
	for _, p := range ports {
		if p.IBDev+"/"+strconv.Itoa(p.Port) == key {
			return p
		}
	}
	return Port{}
}

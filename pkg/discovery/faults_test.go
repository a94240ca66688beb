package discovery_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// portOf returns the expected port of ports with that ibdev and number.
func portOf(t *testing.T, ports []Port, ibdev string, num int) *Port {
	t.Helper()
	for i := range ports {
		if ports[i].IBDev == ibdev && ports[i].Port == num {
			return &ports[i]
		}
	}
	t.Fatalf("no port %s/%d", ibdev, num)
	return nil
}

// TestOneFactUnknown breaks one file of mixedNode at a time: that fact (and only what is
// derived from it) becomes unknown, every other fact of every port stays.
func TestOneFactUnknown(t *testing.T) {
	const (
		mlx50  = "class/infiniband/mlx5_0"
		bond   = "class/infiniband/mlx5_bond_0"
		pciIB  = "bus/pci/devices/0000:03:00.0"
		pciVF  = "bus/pci/devices/0000:04:00.2"
		garble = "\x00\xffgarbage\n"
	)
	tests := []struct {
		name   string
		mutate func(t *testing.T, root string)
		want   func(t *testing.T, ports []Port) []Port
	}{
		{
			name:   "missing rate",
			mutate: func(t *testing.T, root string) { remove(t, root, mlx50+"/ports/1/rate") },
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx5_0", 1)
				p.Rate, p.SpeedGbps = "", nil
				return ps
			},
		},
		{
			name:   "garbled rate",
			mutate: func(t *testing.T, root string) { writeFile(t, root, mlx50+"/ports/1/rate", "fast\n") },
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx5_0", 1)
				p.Rate, p.SpeedGbps = "", nil
				return ps
			},
		},
		{
			name: "garbled state",
			mutate: func(t *testing.T, root string) {
				writeFile(t, root, "class/infiniband/mlx4_0/ports/2/state", "4: DOWN\n")
			},
			want: func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx4_0", 2).State = ""; return ps },
		},
		{
			name:   "missing phys_state",
			mutate: func(t *testing.T, root string) { remove(t, root, mlx50+"/ports/1/phys_state") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).PhysState = ""; return ps },
		},
		{
			name:   "garbled link layer",
			mutate: func(t *testing.T, root string) { writeFile(t, root, mlx50+"/ports/1/link_layer", garble) },
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx5_0", 1)
				p.LinkLayer, p.Netdev, p.MTU, p.NetdevOperState, p.LID, p.SMLID = LinkLayerUnknown, "", nil, "", nil, nil
				return ps
			},
		},
		{
			name:   "garbled node GUID",
			mutate: func(t *testing.T, root string) { writeFile(t, root, mlx50+"/node_guid", "7c8c09\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).NodeGUID = ""; return ps },
		},
		{
			name:   "missing firmware version",
			mutate: func(t *testing.T, root string) { remove(t, root, mlx50+"/fw_ver") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).FWVer = ""; return ps },
		},
		{
			name:   "garbled NUMA node",
			mutate: func(t *testing.T, root string) { writeFile(t, root, pciIB+"/numa_node", "-7\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).NUMANode = nil; return ps },
		},
		{
			name:   "unknown NUMA node",
			mutate: func(t *testing.T, root string) { writeFile(t, root, pciIB+"/numa_node", "-1\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).NUMANode = nil; return ps },
		},
		{
			name:   "missing vendor",
			mutate: func(t *testing.T, root string) { remove(t, root, pciIB+"/vendor") },
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx5_0", 1)
				p.VendorID, p.Model = "", ""
				return ps
			},
		},
		{
			name:   "unbound function",
			mutate: func(t *testing.T, root string) { remove(t, root, pciIB+"/driver") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).Driver = ""; return ps },
		},
		{
			name: "dangling physfn",
			mutate: func(t *testing.T, root string) {
				remove(t, root, pciVF+"/physfn")
				mustSymlink(t, "../0000:04:00.7", root, pciVF+"/physfn")
			},
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx5_2", 1)
				p.PhysFn, p.Model = "", "ConnectX VF"
				return ps
			},
		},
		{
			name:   "garbled netdev MTU",
			mutate: func(t *testing.T, root string) { writeFile(t, root, "class/net/ibp3s0/mtu", "big\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).MTU = nil; return ps },
		},
		{
			name:   "missing dev_port of one IPoIB interface",
			mutate: func(t *testing.T, root string) { remove(t, root, "class/net/ibs17a/dev_port") },
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "mlx4_0", 2)
				p.Netdev, p.MTU, p.NetdevOperState = "", nil, ""
				return ps
			},
		},
		{
			name:   "garbled IPv4 GID",
			mutate: func(t *testing.T, root string) { writeFile(t, root, bond+"/ports/1/gids/3", "0000:0000\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_bond_0", 1).GIDIndex = nil; return ps },
		},
		{
			name:   "garbled GID type",
			mutate: func(t *testing.T, root string) { writeFile(t, root, bond+"/ports/1/gid_attrs/types/3", "RoCE v3\n") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_bond_0", 1).GIDIndex = nil; return ps },
		},
		{
			name: "GID netdevs missing: the function's interface and its bond",
			mutate: func(t *testing.T, root string) {
				remove(t, root, bond+"/ports/1/gid_attrs/ndevs")
			},
			want: func(t *testing.T, ps []Port) []Port { return ps },
		},
		{
			name: "hostile GID netdev name",
			mutate: func(t *testing.T, root string) {
				writeFile(t, root, "class/infiniband/mlx5_2/ports/1/gid_attrs/ndevs/0", "../../etc\n")
			},
			want: func(t *testing.T, ps []Port) []Port { return ps }, // entry 1 names the same netdev
		},
		{
			name:   "missing uverbs ibdev",
			mutate: func(t *testing.T, root string) { remove(t, root, "class/infiniband_verbs/uverbs0/ibdev") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx5_0", 1).Verbs = nil; return ps },
		},
		{
			name:   "no umad for one port",
			mutate: func(t *testing.T, root string) { remove(t, root, "class/infiniband_mad/umad4") },
			want:   func(t *testing.T, ps []Port) []Port { portOf(t, ps, "mlx4_0", 2).UMAD = nil; return ps },
		},
		{
			name:   "no MAD class at all",
			mutate: func(t *testing.T, root string) { remove(t, root, "class/infiniband_mad") },
			want: func(t *testing.T, ps []Port) []Port {
				for i := range ps {
					ps[i].UMAD, ps[i].ISSM = nil, nil
				}
				return ps
			},
		},
		{
			name: "device link leaving the root is skipped",
			mutate: func(t *testing.T, root string) {
				mustSymlink(t, "../../../../../../../../../etc", root, "class/infiniband/evil_0")
			},
			want: func(t *testing.T, ps []Port) []Port { return ps },
		},
		{
			name: "missing parent of a soft-RoCE device",
			mutate: func(t *testing.T, root string) {
				remove(t, root, "class/infiniband/rxe0/parent")
			},
			want: func(t *testing.T, ps []Port) []Port {
				p := portOf(t, ps, "rxe0", 1)
				p.Netdev, p.MTU, p.NetdevOperState = "", nil, ""
				return ps
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeNode(t, mixedNode())
			tt.mutate(t, root)
			inv := discover(t, root)
			if diff := cmp.Diff(tt.want(t, wantMixed()), inv.Ports); diff != "" {
				t.Errorf("ports (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNetnsModeGarbled(t *testing.T) {
	root := writeNode(t, mixedNode())
	writeFile(t, root, NetnsModeFile, "maybe\n")
	inv := discover(t, root)
	if inv.NetnsMode != NetnsModeUnknown || len(inv.Ports) != len(wantMixed()) {
		t.Errorf("NetnsMode = %q with %d ports; want unknown with all ports", inv.NetnsMode, len(inv.Ports))
	}
}

func TestUnreadableRDMAClassIsAnError(t *testing.T) {
	root := writeNode(t, mixedNode())
	remove(t, root, "class/infiniband")
	if err := os.WriteFile(filepath.Join(root, "class/infiniband"), []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{SysfsRoot: root}).Discover(context.Background()); err == nil {
		t.Error("Discover succeeded over a class/infiniband that is a file")
	}
}

func mustSymlink(t *testing.T, target, root, name string) {
	t.Helper()
	if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
		t.Fatal(err)
	}
}

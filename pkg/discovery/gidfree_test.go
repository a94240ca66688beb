package discovery_test

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// TestFreeGIDEntries counts the all-zero entries of a port's GID table: those the kernel
// can still fill with the GIDs of new addresses (a pod's macvlan or ipvlan child).
func TestFreeGIDEntries(t *testing.T) {
	const ndev = "ens5f0"
	ll := mocknode.LinkLocalGID(mocknode.MACToGUID(0x020000000000))
	tests := []struct {
		name string
		size int
		gids func() []mocknode.GID
		// edit changes the written tree (root, port directory) before the count.
		edit func(t *testing.T, root, port string)
		want int
		err  string // a part of the error; empty: none
	}{
		{name: "default GIDs and one address", size: 16, gids: func() []mocknode.GID { return mocknode.RoCEGIDs(ndev, ll, "10.0.0.1") }, want: 12},
		{name: "full", size: 4, gids: func() []mocknode.GID { return mocknode.RoCEGIDs(ndev, ll, "10.0.0.1") }, want: 0},
		{name: "sparse", size: 256, gids: func() []mocknode.GID {
			return []mocknode.GID{{Index: 0, GID: ll, Type: mocknode.GIDTypeRoCEv1, Ndev: ndev}, {Index: 200, GID: ll, Type: mocknode.GIDTypeRoCEv2, Ndev: ndev}}
		}, want: 254},
		{name: "an unreadable entry is not free", size: 8, gids: func() []mocknode.GID { return nil },
			edit: func(t *testing.T, root, port string) { writeFile(t, root, port+"/gids/3", "garbage\n") }, want: 7},
		{name: "names that are no index are ignored", size: 8, gids: func() []mocknode.GID { return nil },
			edit: func(t *testing.T, root, port string) { writeFile(t, root, port+"/gids/README", "0000\n") }, want: 8},
		{name: "no GID table", size: 8, gids: func() []mocknode.GID { return nil },
			edit: func(t *testing.T, root, port string) { remove(t, root, port+"/gids") }, err: "count free GID entries of mlx5_0 port 1: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := roceNode(1, "", func(int, string) []mocknode.GID { return tc.gids() })
			n.RDMADevices[0].Ports[0].GIDTableSize = tc.size
			root := writeNode(t, n)
			if tc.edit != nil {
				tc.edit(t, root, "class/infiniband/mlx5_0/ports/1")
			}
			got, err := FreeGIDEntries(root, "mlx5_0", 1)
			switch {
			case tc.err != "":
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want it to contain %q", err, tc.err)
				}
			case err != nil:
				t.Fatal(err)
			case got != tc.want:
				t.Errorf("FreeGIDEntries = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestFreeGIDEntriesRefusesBadNames: the device and port come from checkpoint records;
// a name that could leave the port's directory is refused, not read.
func TestFreeGIDEntriesRefusesBadNames(t *testing.T) {
	root := writeNode(t, roceNode(1, "", func(int, string) []mocknode.GID { return nil }))
	for _, tc := range []struct {
		ibdev string
		port  int
	}{{"../mlx5_0", 1}, {"", 1}, {"mlx5_0", 0}, {"mlx5_0", -1}} {
		t.Run(fmt.Sprintf("%q port %d", tc.ibdev, tc.port), func(t *testing.T) {
			if n, err := FreeGIDEntries(root, tc.ibdev, tc.port); err == nil {
				t.Errorf("FreeGIDEntries = %d, want an error", n)
			}
		})
	}
}

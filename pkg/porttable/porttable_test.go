package porttable

import (
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// writeNode writes the dgx-h100 mock node with these changes and returns its sysfs root:
//
//   - mlx5_0/1 keeps the profile's P_Key table, 0xffff and 0x8001;
//   - mlx5_1/1 has 0xffff, 0x8002, 0x8001 and a limited 0x0003;
//   - mlx5_8/1 (RoCE) has its link-local entries 0 and 1, 10.200.0.11 at 2 (v1) and 3
//     (v2), and fd00:200::11 at 4 (v1) and 5 (v2);
//   - mlx5_9/1 (RoCE) has the profile's entries: link-local and one IPv4 address only.
func writeNode(t *testing.T) string {
	t.Helper()
	p, err := mocknode.Lookup("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node()
	for i := range n.RDMADevices {
		d := &n.RDMADevices[i]
		switch d.Name {
		case "mlx5_1":
			d.Ports[0].PKeys = []uint16{0xffff, 0x8002, 0x8001, 0x0003}
		case "mlx5_8":
			nd := d.Ports[0].GIDs[0].Ndev
			ll := d.Ports[0].GIDs[0].GID
			d.Ports[0].GIDs = mocknode.RoCEGIDs(nd, ll, "10.200.0.11", "fd00:200::11")
		}
	}
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

func TestPKeyTable(t *testing.T) {
	r := New(writeNode(t))
	tests := []struct {
		name    string
		ibdev   string
		port    int
		want    string // the table as PKeyTable.String writes it
		wantErr string
	}{
		{name: "the profile's table", ibdev: "mlx5_0", port: 1, want: "[0]=0xffff [1]=0x8001"},
		{name: "a longer table", ibdev: "mlx5_1", port: 1, want: "[0]=0xffff [1]=0x8002 [2]=0x8001 [3]=0x0003"},
		{name: "a port that is not there", ibdev: "mlx5_42", port: 1, wantErr: "read P_Key table of port mlx5_42/1:"},
		{name: "port 0", ibdev: "mlx5_0", port: 0, wantErr: "read P_Key table: port 0 of mlx5_0: ports are numbered from 1"},
		{name: "a device name that leaves the directory", ibdev: "../mlx5_0", port: 1, wantErr: "read P_Key table:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.PKeyTable(tt.ibdev, tt.port)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PKeyTable = %v, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("PKeyTable = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestGIDIndexFollowsVersionAndFamily: the entry of the asked RoCE version and address
// family, never a link-local one.
func TestGIDIndexFollowsVersionAndFamily(t *testing.T) {
	r := New(writeNode(t))
	tests := []struct {
		name    string
		ibdev   string
		version int
		family  v1alpha1.AddressFamily
		want    int
		wantErr string
	}{
		{name: "RoCE v2 over IPv4, the default rule's entry", ibdev: "mlx5_8", version: 2, family: v1alpha1.AddressFamilyIPv4, want: 3},
		{name: "RoCE v2 over IPv6", ibdev: "mlx5_8", version: 2, family: v1alpha1.AddressFamilyIPv6, want: 5},
		{name: "RoCE v1 over IPv4 skips the link-local v1 entry", ibdev: "mlx5_8", version: 1, family: v1alpha1.AddressFamilyIPv4, want: 2},
		{name: "RoCE v1 over IPv6", ibdev: "mlx5_8", version: 1, family: v1alpha1.AddressFamilyIPv6, want: 4},
		{name: "no IPv6 address on the port", ibdev: "mlx5_9", version: 2, family: v1alpha1.AddressFamilyIPv6,
			wantErr: "port mlx5_9/1 has no RoCE v2 GID entry with a global IPv6 address; its entries: [0] fe80::"},
		{name: "InfiniBand has no RoCE entries", ibdev: "mlx5_0", version: 2, family: v1alpha1.AddressFamilyIPv4,
			wantErr: "port mlx5_0/1 has no RoCE v2 GID entry with an IPv4 address"},
		{name: "a port that is not there", ibdev: "mlx5_42", version: 2, family: v1alpha1.AddressFamilyIPv4, wantErr: "read GID table of mlx5_42/1"},
		{name: "RoCE version 3", ibdev: "mlx5_8", version: 3, family: v1alpha1.AddressFamilyIPv4, wantErr: "RoCE version 3: want 1 or 2"},
		{name: "an unknown family", ibdev: "mlx5_8", version: 2, family: "AF_INET", wantErr: `address family "AF_INET": want ipv4 or ipv6`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := r.GIDIndex(tt.ibdev, 1, tt.version, tt.family)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("GIDIndex = %d, %v; want error %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("GIDIndex = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

// TestGIDIndexReadsTheTableNow: an address added after a first read is seen by the next.
func TestGIDIndexReadsTheTableNow(t *testing.T) {
	root := writeNode(t)
	r := New(root)
	if _, err := r.GIDIndex("mlx5_9", 1, 2, v1alpha1.AddressFamilyIPv6); err == nil {
		t.Fatal("found an IPv6 entry on a port without one")
	}
	dir := filepath.Join(root, "class", "infiniband", "mlx5_9", "ports", "1")
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	gid := netip.MustParseAddr("fd00:200::12").As16()
	writeFile(t, filepath.Join(real, "gids", "7"), sysfs.GID(gid).String())
	writeFile(t, filepath.Join(real, "gid_attrs", "types", "7"), "RoCE v2")
	if got, err := r.GIDIndex("mlx5_9", 1, 2, v1alpha1.AddressFamilyIPv6); err != nil || got != 7 {
		t.Errorf("after the address was added: %d, %v; want 7", got, err)
	}
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

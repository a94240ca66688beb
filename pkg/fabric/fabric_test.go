package fabric

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// writeNode writes the dgx-h100 mock node, changed by change, and returns its sysfs root.
// mlx5_0 is an ACTIVE InfiniBand port with SM LID 0x1 and P_Keys 0xffff and 0x8001;
// mlx5_8 is an ACTIVE RoCE port whose GID 3 is an IPv4-mapped RoCE v2 entry (entries 0
// and 1 are link-local).
func writeNode(t *testing.T, change func(n *mocknode.Node)) string {
	t.Helper()
	p, err := mocknode.Lookup("dgx-h100")
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node()
	if change != nil {
		change(n)
	}
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

func pkey(v uint16) *uint16 { return &v }

// edit is a change of one file of a port's directory for one case: new content, or
// removed when data is "".
type edit struct{ file, data string }

func TestCheck(t *testing.T) {
	// Writing a node costs a fraction of a second; the cases change files of one tree and
	// put them back.
	root := writeNode(t, nil)
	ib := &discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand}
	roce := &discovery.Port{IBDev: "mlx5_8", Port: 1, LinkLayer: discovery.LinkLayerEthernet}
	tests := []struct {
		name       string
		port       *discovery.Port
		edits      []edit
		want       Want
		wantReason string
		wantMsg    string
	}{
		{name: "InfiniBand ready", port: ib},
		{name: "InfiniBand ready with a full P_Key in the table", port: ib, want: Want{PKey: pkey(0x8001)}},
		{name: "a limited P_Key matches a full entry", port: ib, want: Want{PKey: pkey(0x0001)}},
		{name: "a full P_Key needs a full entry", port: ib, want: Want{PKey: pkey(0x8002)}, edits: []edit{{"pkeys/1", "0x0002"}},
			wantReason: ReasonPKeyMissing, wantMsg: "port mlx5_0/1: P_Key 0x8002 not in the port's table"},
		{name: "a limited P_Key matches a limited entry", port: ib, want: Want{PKey: pkey(0x0002)}, edits: []edit{{"pkeys/1", "0x0002"}}},
		{name: "P_Key missing", port: ib, want: Want{PKey: pkey(0x8002)},
			wantReason: ReasonPKeyMissing, wantMsg: "port mlx5_0/1: P_Key 0x8002 not in the port's table"},
		{name: "a garbled P_Key table is unreadable", port: ib, want: Want{PKey: pkey(0x8002)}, edits: []edit{{"pkeys/1", "8001"}},
			wantReason: ReasonUnreadable, wantMsg: "port mlx5_0/1: read P_Key table:"},
		{name: "port DOWN", port: ib, edits: []edit{{"state", "1: DOWN"}},
			wantReason: ReasonPortNotActive, wantMsg: "port mlx5_0/1 is DOWN"},
		{name: "port INIT: the SM has not configured it", port: ib, edits: []edit{{"state", "2: INIT"}},
			wantReason: ReasonPortNotActive, wantMsg: "port mlx5_0/1 is INIT"},
		{name: "no subnet manager", port: ib, edits: []edit{{"sm_lid", "0x0"}},
			wantReason: ReasonNoSubnetManager, wantMsg: "port mlx5_0/1: no subnet manager: sm_lid 0"},
		{name: "the state is checked first", port: ib, want: Want{PKey: pkey(0x8002)}, edits: []edit{{"state", "1: DOWN"}, {"sm_lid", "0x0"}},
			wantReason: ReasonPortNotActive, wantMsg: "port mlx5_0/1 is DOWN"},
		{name: "RoCE ready", port: roce},
		{name: "a P_Key is not checked on RoCE", port: roce, want: Want{PKey: pkey(0x8002)}},
		{name: "RoCE with link-local GIDs only", port: roce, edits: []edit{{"gid_attrs/types/2", ""}, {"gid_attrs/types/3", ""}},
			wantReason: ReasonNoGID, wantMsg: "port mlx5_8/1: no RoCE v2 GID with an IPv4 or global IPv6 address"},
		{name: "RoCE DOWN", port: roce, edits: []edit{{"state", "1: DOWN"}},
			wantReason: ReasonPortNotActive, wantMsg: "port mlx5_8/1 is DOWN"},
		{name: "a port that is gone", port: &discovery.Port{IBDev: "mlx5_42", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand},
			wantReason: ReasonUnreadable, wantMsg: "port mlx5_42/1: read state:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(root, "class", "infiniband", tt.port.IBDev, "ports", "1")
			for _, e := range tt.edits {
				applyEdit(t, filepath.Join(dir, e.file), e.data)
			}
			err := New(root).Check(tt.port, tt.want)
			if tt.wantReason == "" {
				if err != nil {
					t.Fatalf("Check = %v, want ready", err)
				}
				return
			}
			var nr *NotReady
			if !errors.As(err, &nr) {
				t.Fatalf("Check = %v, want a *NotReady", err)
			}
			if nr.Reason != tt.wantReason {
				t.Errorf("reason %q, want %q", nr.Reason, tt.wantReason)
			}
			if got := err.Error(); !strings.HasPrefix(got, tt.wantMsg) {
				t.Errorf("message %q, want it to start with %q", got, tt.wantMsg)
			}
		})
	}
}

// applyEdit changes the file at path for the rest of the (sub)test and puts it back
// after; data "" removes it.
func applyEdit(t *testing.T, path, data string) {
	t.Helper()
	real, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(real, filepath.Base(path))
	old, err := os.ReadFile(path)
	existed := err == nil
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	if data == "" {
		err = os.Remove(path)
	} else {
		err = os.WriteFile(path, []byte(data+"\n"), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if existed {
			_ = os.WriteFile(path, old, 0o644)
		} else {
			_ = os.Remove(path)
		}
	})
}

// TestCheckSeesChanges checks that every check reads the tree anew: a P_Key entry added
// and a port brought up after a first check are seen by the next one (the sysfs package
// caches listings per FS).
func TestCheckSeesChanges(t *testing.T) {
	root := writeNode(t, func(n *mocknode.Node) {
		p := n.RDMADevices[0].Ports[0]
		p.State = "DOWN"
		n.RDMADevices[0].Ports[0] = p
	})
	c := New(root)
	ib := &discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand}
	want := Want{PKey: pkey(0x8002)}
	if err := c.Check(ib, want); err == nil || err.Error() != "port mlx5_0/1 is DOWN" {
		t.Fatalf("first check = %v, want DOWN", err)
	}
	dir := filepath.Join(root, "class", "infiniband", "mlx5_0", "ports", "1")
	applyEdit(t, filepath.Join(dir, "state"), "4: ACTIVE")
	if err := c.Check(ib, want); err == nil || err.Error() != "port mlx5_0/1: P_Key 0x8002 not in the port's table" {
		t.Fatalf("after the port came up = %v, want the missing P_Key", err)
	}
	applyEdit(t, filepath.Join(dir, "pkeys", "2"), "0x8002")
	if err := c.Check(ib, want); err != nil {
		t.Fatalf("after the P_Key was added = %v, want ready", err)
	}
}

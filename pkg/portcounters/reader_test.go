package portcounters

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// writeProfile writes a mock node's tree with the counters set on the given ports
// ("ibdev/port") and returns its sysfs root.
func writeProfile(t testing.TB, profile string, counters map[string]map[string]uint64) string {
	t.Helper()
	p, err := mocknode.Lookup(profile)
	if err != nil {
		t.Fatal(err)
	}
	n := p.Node()
	for i := range n.RDMADevices {
		d := &n.RDMADevices[i]
		for j := range d.Ports {
			if c, ok := counters[d.Name+"/"+strconv.Itoa(d.Ports[j].Number)]; ok {
				d.Ports[j].Counters = c
			}
		}
	}
	dir := t.TempDir()
	if err := n.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

// portFile is the path of a counter file of a port, through class/infiniband.
func portFile(root, ibdev string, port int, dir, name string) string {
	return filepath.Join(root, "class/infiniband", ibdev, "ports", strconv.Itoa(port), dir, name)
}

func find(r Reading, ibdev string) *PortReading {
	for i := range r.Ports {
		if r.Ports[i].IBDev == ibdev {
			return &r.Ports[i]
		}
	}
	return nil
}

func hwValue(pr *PortReading, name string) (uint64, bool) {
	for _, c := range pr.HW {
		if c.Name == name {
			return c.Value, true
		}
	}
	return 0, false
}

func TestReadNamedAndHWCounters(t *testing.T) {
	root := writeProfile(t, "dgx-h100", map[string]map[string]uint64{
		"mlx5_0/1": {"port_xmit_data": 1000, "port_rcv_data": 2000, "port_xmit_packets": 10, "port_rcv_packets": 20,
			"symbol_error": 3, "link_downed": 1, "port_rcv_errors": 4, "port_xmit_discards": 5, "out_of_buffer": 6},
		"mlx5_8/1": {"np_cnp_sent": 70, "rp_cnp_handled": 80},
	})
	r := NewReader(root)
	r.Track([]Port{{IBDev: "mlx5_0", Port: 1, LinkLayer: "InfiniBand"}, {IBDev: "mlx5_8", Port: 1, LinkLayer: "Ethernet"}, {IBDev: "mlx5_77", Port: 1}})
	got := r.Read()
	if got.Errors != 0 {
		t.Errorf("Errors = %d, want 0", got.Errors)
	}
	if n := len(got.Ports); n != 3 {
		t.Fatalf("%d ports read, want the 3 tracked", n)
	}

	ib := find(got, "mlx5_0")
	wantValues := [NumCounters]uint64{XmitData: 1000, RcvData: 2000, XmitPackets: 10, RcvPackets: 20, SymbolError: 3, LinkDowned: 1, RcvErrors: 4, XmitDiscards: 5}
	if ib.Values != wantValues {
		t.Errorf("mlx5_0 named counters %v, want %v (words as the files hold them)", ib.Values, wantValues)
	}
	for c := range NumCounters {
		if !ib.Has[c] {
			t.Errorf("mlx5_0 %s not read", c.File())
		}
	}
	var names []string
	for _, c := range ib.HW {
		names = append(names, c.Name)
	}
	if !slices.IsSorted(names) || slices.Contains(names, "lifespan") || !slices.Contains(names, "out_of_buffer") || slices.Contains(names, "np_cnp_sent") {
		t.Errorf("mlx5_0 hw counters %v: want mlx5's InfiniBand counters, sorted, without lifespan", names)
	}
	if v, _ := hwValue(ib, "out_of_buffer"); v != 6 {
		t.Errorf("mlx5_0 out_of_buffer = %d, want 6", v)
	}

	roce := find(got, "mlx5_8")
	for name, want := range map[string]uint64{"np_cnp_sent": 70, "rp_cnp_handled": 80} {
		if v, ok := hwValue(roce, name); !ok || v != want {
			t.Errorf("mlx5_8 %s = %d, %v, want %d", name, v, ok, want)
		}
	}
	if gone := find(got, "mlx5_77"); gone == nil || slices.Contains(gone.Has[:], true) || gone.HW != nil {
		t.Errorf("a port that does not exist reads %+v, want nothing", gone)
	}
}

// TestReadSoftRoCE: soft-RoCE has no counters/; its link_downed is in hw_counters/.
func TestReadSoftRoCE(t *testing.T) {
	root := writeProfile(t, "soft-roce", map[string]map[string]uint64{"rxe0/1": {"link_downed": 2, "sent_pkts": 99}})
	r := NewReader(root)
	r.Track([]Port{{IBDev: "rxe0", Port: 1, LinkLayer: "Ethernet"}})
	got := r.Read()
	pr := find(got, "rxe0")
	want := [NumCounters]bool{LinkDowned: true}
	if pr.Has != want || pr.Values[LinkDowned] != 2 {
		t.Errorf("rxe0 named counters %v (read %v), want only link_downed = 2", pr.Values, pr.Has)
	}
	if v, _ := hwValue(pr, "sent_pkts"); v != 99 {
		t.Errorf("rxe0 sent_pkts = %d, want 99", v)
	}
	le := r.ReadLinkErrors()
	if len(le) != 1 || !le[0].HasLinkDowned || le[0].LinkDowned != 2 || le[0].HasSymbolError {
		t.Errorf("ReadLinkErrors() = %+v, want link_downed 2 from hw_counters and no symbol_error", le)
	}
}

// TestReadFaults: missing files are skipped silently, files that cannot be read or
// parsed are skipped and counted, and the rest of the port is read.
func TestReadFaults(t *testing.T) {
	tests := []struct {
		name       string
		fault      func(root string) error
		wantErrors int
		lost       Counter // the named counter that is not read
		lostHW     string  // or the hw counter
	}{
		{name: "missing file", fault: func(root string) error {
			return os.Remove(portFile(root, "mlx5_0", 1, CountersDir, "symbol_error"))
		}, lost: SymbolError},
		{name: "no PMA answer", fault: func(root string) error {
			return os.WriteFile(portFile(root, "mlx5_0", 1, CountersDir, "port_rcv_errors"), []byte("N/A (no PMA)\n"), 0o644)
		}, wantErrors: 1, lost: RcvErrors},
		{name: "a directory", fault: func(root string) error {
			p := portFile(root, "mlx5_0", 1, CountersDir, "link_downed")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Mkdir(p, 0o755)
		}, wantErrors: 1, lost: LinkDowned},
		{name: "a symbolic link", fault: func(root string) error {
			p := portFile(root, "mlx5_0", 1, CountersDir, "port_xmit_data")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("port_rcv_data", p)
		}, wantErrors: 1, lost: XmitData},
		{name: "too long", fault: func(root string) error {
			return os.WriteFile(portFile(root, "mlx5_0", 1, CountersDir, "port_xmit_discards"), []byte("123456789012345678901234567890123\n"), 0o644)
		}, wantErrors: 1, lost: XmitDiscards},
		{name: "hw counter gone after the scan", fault: func(root string) error {
			return os.Remove(portFile(root, "mlx5_0", 1, HWCountersDir, "out_of_buffer"))
		}, lost: NumCounters, lostHW: "out_of_buffer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeProfile(t, "dgx-h100", nil)
			r := NewReader(root)
			r.Track([]Port{{IBDev: "mlx5_0", Port: 1, LinkLayer: "InfiniBand"}})
			if err := tt.fault(root); err != nil {
				t.Fatal(err)
			}
			got := r.Read()
			if got.Errors != tt.wantErrors {
				t.Errorf("Errors = %d, want %d", got.Errors, tt.wantErrors)
			}
			pr := &got.Ports[0]
			for c := range NumCounters {
				if pr.Has[c] == (c == tt.lost) {
					t.Errorf("%s read: %v, want %v", c.File(), pr.Has[c], c != tt.lost)
				}
			}
			_, ok := hwValue(pr, tt.lostHW)
			if tt.lostHW != "" && ok {
				t.Errorf("%s read after it was removed", tt.lostHW)
			}
			if len(pr.HW) < 10 {
				t.Errorf("only %d hw counters read", len(pr.HW))
			}
		})
	}
}

// TestReadSeesNewValues: nothing is cached below the reader; Track is what changes the
// ports and the hw counter names.
func TestReadSeesNewValues(t *testing.T) {
	root := writeProfile(t, "dgx-h100", map[string]map[string]uint64{"mlx5_1/1": {"link_downed": 1, "symbol_error": 10}})
	r := NewReader(root)
	r.Track([]Port{{IBDev: "mlx5_1", Port: 1, LinkLayer: "InfiniBand"}})
	if err := os.WriteFile(portFile(root, "mlx5_1", 1, CountersDir, "link_downed"), []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(portFile(root, "mlx5_1", 1, CountersDir, "symbol_error"), []byte("12"), 0o644); err != nil { // no newline: still read
		t.Fatal(err)
	}
	want := []LinkErrors{{Port: Port{IBDev: "mlx5_1", Port: 1, LinkLayer: "InfiniBand"}, LinkDowned: 3, SymbolError: 12, HasLinkDowned: true, HasSymbolError: true}}
	if diff := cmp.Diff(want, r.ReadLinkErrors()); diff != "" {
		t.Errorf("ReadLinkErrors (-want +got):\n%s", diff)
	}
	if got := r.Read().Ports[0].Values[LinkDowned]; got != 3 {
		t.Errorf("Read link_downed = %d, want 3", got)
	}
	r.Track(nil)
	if got := r.Read(); len(got.Ports) != 0 || len(r.Ports()) != 0 {
		t.Errorf("after Track(nil) read %d ports", len(got.Ports))
	}
}

func TestDelta(t *testing.T) {
	for _, tt := range []struct {
		old, now, want uint64
	}{
		{old: 5, now: 7, want: 2},
		{old: 5, now: 5, want: 0},
		{old: 200, now: 3, want: 3}, // reset: counted 3 since
		{old: 1<<32 - 10, now: 4, want: 4},
	} {
		if got := Delta(tt.old, tt.now); got != tt.want {
			t.Errorf("Delta(%d, %d) = %d, want %d", tt.old, tt.now, got, tt.want)
		}
	}
}

package mocknode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCounterDirectories checks which counter files each kind of port gets: counters/
// only where the driver answers management datagrams (mlx4, mlx5), hw_counters/ with the
// driver's own names (mlx5, RoCE-only ones on Ethernet ports, soft-RoCE), and neither for
// drivers whose counters are not modelled.
func TestCounterDirectories(t *testing.T) {
	for _, tc := range []struct {
		profile, port string
		pma           bool
		hwHas, hwLack []string
		hw            bool
	}{
		{profile: "dgx-h100", port: "mlx5_0/ports/1", pma: true, hw: true,
			hwHas: []string{"out_of_buffer", "rx_write_requests", "lifespan"}, hwLack: []string{"np_cnp_sent", "rp_cnp_handled"}},
		{profile: "dgx-h100", port: "mlx5_8/ports/1", pma: true, hw: true,
			hwHas: []string{"out_of_buffer", "np_cnp_sent", "rp_cnp_handled", "np_ecn_marked_roce_packets", "lifespan"}},
		{profile: "vpi-dual-port", port: "mlx4_0/ports/2", pma: true},
		{profile: "soft-roce", port: "rxe0/ports/1", hw: true, hwHas: []string{"link_downed", "sent_pkts", "rcvd_pkts", "lifespan"}},
		{profile: "intel-e810", port: "irdma0/ports/1"},
	} {
		t.Run(tc.profile+"/"+tc.port, func(t *testing.T) {
			dir := t.TempDir()
			if err := WriteProfile(tc.profile, dir, WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			port := filepath.Join(dir, SysDir, "class/infiniband", tc.port)
			if _, err := os.Stat(port); err != nil {
				t.Fatalf("no such port: %v", err)
			}
			pma, err := os.ReadDir(filepath.Join(port, CountersDir))
			if got := err == nil; got != tc.pma {
				t.Fatalf("counters/ exists: %v, want %v", got, tc.pma)
			}
			if tc.pma && len(pma) != len(pmaCounters) {
				t.Errorf("counters/ has %d files, want the %d of the extended counters", len(pma), len(pmaCounters))
			}
			_, err = os.ReadDir(filepath.Join(port, HWCountersDir))
			if got := err == nil; got != tc.hw {
				t.Fatalf("hw_counters/ exists: %v, want %v", got, tc.hw)
			}
			for _, f := range tc.hwHas {
				if _, err := os.Stat(filepath.Join(port, HWCountersDir, f)); err != nil {
					t.Errorf("hw_counters/%s: %v", f, err)
				}
			}
			for _, f := range tc.hwLack {
				if _, err := os.Stat(filepath.Join(port, HWCountersDir, f)); err == nil {
					t.Errorf("hw_counters/%s exists on a port that has no such counter", f)
				}
			}
		})
	}
}

// TestCounterValues checks the values written: a port's own settings as given, the
// others plausible (an ACTIVE port has carried traffic, error counters fit their width)
// and the same on every write.
func TestCounterValues(t *testing.T) {
	n := smallNode()
	n.RDMADevices[0].Ports[0].Counters = map[string]uint64{"link_downed": 7, "port_xmit_data": 1 << 40, "out_of_buffer": 3}
	read := func(dir, rel string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, SysDir, "class/infiniband", rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	dirs := []string{t.TempDir(), t.TempDir()}
	for _, dir := range dirs {
		if err := n.Write(dir, WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for rel, want := range map[string]string{
		"mlx5_0/ports/1/counters/link_downed":      "7",
		"mlx5_0/ports/1/counters/port_xmit_data":   "1099511627776",
		"mlx5_0/ports/1/hw_counters/out_of_buffer": "3",
		"mlx5_0/ports/1/hw_counters/lifespan":      "10",
	} {
		if got := read(dirs[0], rel); got != want {
			t.Errorf("%s = %s, want %s", rel, got, want)
		}
	}
	for _, rel := range []string{"mlx5_1/ports/1/counters/port_rcv_data", "mlx5_1/ports/1/counters/symbol_error", "mlx5_1/ports/1/hw_counters/np_cnp_sent"} {
		if a, b := read(dirs[0], rel), read(dirs[1], rel); a != b {
			t.Errorf("%s differs between two writes: %s, %s", rel, a, b)
		}
	}
	if v := read(dirs[0], "mlx5_1/ports/1/counters/port_rcv_data"); len(v) < 10 {
		t.Errorf("port_rcv_data of an ACTIVE port is %s, want the traffic of a node that has been up a while", v)
	}
}

func TestCounterValidation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		counters map[string]uint64
		want     string
	}{
		{"unknown counter", map[string]uint64{"np_cnp_sent": 1}, "port 1: the port has no counter np_cnp_sent"},
		{"wider than the counter", map[string]uint64{"link_downed": 256}, "counter link_downed is 8 bits wide, 256 does not fit"},
		{"lifespan is no counter", map[string]uint64{"lifespan": 10}, "no counter lifespan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := smallNode()
			n.RDMADevices[0].Ports[0].Counters = tc.counters // InfiniBand: no RoCE counters
			err := n.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error with %q", err, tc.want)
			}
		})
	}
}

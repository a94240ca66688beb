package mocknode

import (
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// TestVPDBytes reads the encoding back with the parser discovery uses: every keyword
// set is there with its value, unset ones are left out, RV closes the section.
func TestVPDBytes(t *testing.T) {
	tests := []struct {
		name string
		vpd  VPD
		want map[string]string // keyword to value; "" for absent
	}{
		{name: "full", vpd: VPD{ProductName: "NVIDIA ConnectX-8 SuperNIC", PartNumber: "900-9X81E-00EX-ST0", SerialNumber: "MT2510X01234",
			UUID: "3e1f0a2b4c5d6e7f8091a2b3c4d5e6f7", FunctionID: "MT2510X01234MLNXS0D0F0"},
			want: map[string]string{"PN": "900-9X81E-00EX-ST0", "SN": "MT2510X01234", "V3": "3e1f0a2b4c5d6e7f8091a2b3c4d5e6f7", "VU": "MT2510X01234MLNXS0D0F0"}},
		{name: "name and uuid only", vpd: VPD{ProductName: "x", UUID: "00000000000000000000000000000001"},
			want: map[string]string{"PN": "", "SN": "", "V3": "00000000000000000000000000000001", "VU": ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.vpd.Bytes()
			v, err := sysfs.ParseVPD(b)
			if err != nil {
				t.Fatalf("ParseVPD: %v", err)
			}
			if v.Name != tt.vpd.ProductName || v.ReadOnly[len(v.ReadOnly)-1].Keyword != "RV" {
				t.Errorf("name %q, last keyword %q; want %q, RV", v.Name, v.ReadOnly[len(v.ReadOnly)-1].Keyword, tt.vpd.ProductName)
			}
			for kw, want := range tt.want {
				got, ok := v.Keyword(kw)
				if ok != (want != "") || got != want {
					t.Errorf("%s = %q, %v; want %q", kw, got, ok, want)
				}
			}
			var sum byte
			for _, x := range b[:len(b)-1] {
				sum += x
			}
			if sum != 0 {
				t.Errorf("bytes up to RV sum to %d, want 0", sum)
			}
		})
	}
}

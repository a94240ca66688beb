package nccltopo

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// modaliasSPR is a Sapphire Rapids CPU's modalias: family 6, model 0x8f.
const modaliasSPR = "cpu:type:x86,ven0000fam0006mod008F:feature:,0000,0001,0002,0003"

func TestParseModalias(t *testing.T) {
	tests := []struct {
		in      string
		want    cpuInfo
		wantErr bool
	}{
		{in: modaliasSPR, want: cpuInfo{arch: "x86_64", vendor: "GenuineIntel", familyID: 6, modelID: 0x8f}},
		{in: "cpu:type:x86,ven0002fam0019mod0011:feature:", want: cpuInfo{arch: "x86_64", vendor: "AuthenticAMD", familyID: 25, modelID: 17}},
		{in: "cpu:type:x86,ven000Afam0007mod005B:feature:", want: cpuInfo{arch: "x86_64", vendor: "  Shanghai  ", familyID: 7, modelID: 0x5b}},
		{in: "cpu:type:x86,ven0009fam0018mod0000:feature:", want: cpuInfo{arch: "x86_64", vendor: "HygonGenuine", familyID: 24}},
		{in: "cpu:type:aarch64:feature:,0000,0001", want: cpuInfo{arch: "arm64"}},
		{in: "cpu:type:x86,ven0007fam0006mod0001:feature:", wantErr: true}, // Transmeta: no name NCCL knows
		{in: "cpu:type:x86,ven0000fam06mod8F:feature:", wantErr: true},
		{in: "cpu:type:x86,venXXXXfam0006mod008F:feature:", wantErr: true},
		{in: "cpu:type:riscv64:feature:", wantErr: true},
		{in: "type:x86", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseModalias(tt.in)
			if tt.wantErr {
				if !errors.Is(err, sysfs.ErrSyntax) {
					t.Errorf("parseModalias(%q) = %+v, %v; want an ErrSyntax", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseModalias(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseCPUMap(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "ffffffff", want: "ffffffff"},
		{in: "00000000,00000000,0000ffff,ffffffff", want: "0000ffff,ffffffff"},
		{in: "00000000,00000000", want: "00000000"}, // a node without CPUs
		{in: "ffffffff,00000000", want: "ffffffff,00000000"},
		// The kernel's first word is as wide as the possible CPUs need: 144 of a Grace
		// tray, 56 in NCCL's own example, 8 of a small VM.
		{in: "0000,00000000,000000ff,ffffffff,ffffffff", want: "000000ff,ffffffff,ffffffff"},
		{in: "ffff,ffffffff,ffffff00,00000000,00000000", want: "ffff,ffffffff,ffffff00,00000000,00000000"},
		{in: "0003ff,f0003fff", want: "0003ff,f0003fff"},
		{in: "ff", want: "ff"},
		{in: "00,00000000", want: "00000000"},
		{in: "FFFFFFFF", wantErr: true},
		{in: "ffffffff,ffff", wantErr: true}, // only the first word is short
		{in: "0ffffffff", wantErr: true},
		{in: "ffffffff,", wantErr: true},
		{in: ",ffffffff", wantErr: true},
		{in: "0-31", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseCPUMap(tt.in)
			if tt.wantErr {
				if !errors.Is(err, sysfs.ErrSyntax) {
					t.Errorf("parseCPUMap(%q) = %q, %v; want an ErrSyntax", tt.in, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseCPUMap(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestCheckBusID(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"0000:3b:00.0", true},
		{"0008:04:1f.7", true},
		{"10000:e1:00.0", true}, // a VMD domain
		{"0000:3B:00.0", false},
		{"00000000:3b:00.0", true},
		{"000000000:3b:00.0", false},
		{"0000:3b:20.0", false}, // device numbers end at 0x1f
		{"0000:3b:00.8", false},
		{"3b:00.0", false},
		{"0000:3b:00", false},
		{"", false},
	}
	for _, tt := range tests {
		if err := checkBusID(tt.in); (err == nil) != tt.ok {
			t.Errorf("checkBusID(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

func TestIsBDF(t *testing.T) {
	for s, want := range map[string]bool{
		"0000:00:01.0": true, "0000:AB:01.0": true, "pci0000:00": false, "10000:e0:00.0": false,
		"pci10000:e0": false, "0000:00:01": false, "virtio0": false,
	} {
		if got := isBDF(s); got != want {
			t.Errorf("isBDF(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestGTps(t *testing.T) {
	for s, want := range map[string]float64{
		"32.0 GT/s PCIe": 32, "2.5 GT/s PCIe": 2.5, "8 GT/s": 8, "64.0 GT/s PCIe": 64,
		"Unknown": math.Inf(1), "": math.Inf(1), "0 GT/s": math.Inf(1), "NaN GT/s": math.Inf(1), "16.0GT/s": math.Inf(1),
	} {
		if got := gtps(s); got != want {
			t.Errorf("gtps(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCheckValue(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"mlx5_0", true},
		{"16.0 GT/s PCIe", true},
		{"  Shanghai  ", true},
		{"", true},
		{strings.Repeat("f", MaxValueLen), true},
		{strings.Repeat("f", MaxValueLen+1), false},
		{`mlx5"0`, false},
		{"a&b", false},
		{"a<b", false},
		{"a\tb", false},
		{"a\nb", false},
		{"é", false},
	}
	for _, tt := range tests {
		if err := checkValue(tt.in); (err == nil) != tt.ok {
			t.Errorf("checkValue(%q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
	}
}

// TestMarshalRefuses checks that the writer refuses what NCCL would misread rather than
// escape it: NCCL does not unescape.
func TestMarshalRefuses(t *testing.T) {
	many := &element{name: "net"}
	for i := range maxAttrs + 1 {
		many.attrs = append(many.attrs, attr{key: "a" + strings.Repeat("x", i), value: "1"})
	}
	tests := map[string]*element{
		"quote in a value": {name: "system", subs: []*element{{name: "net", attrs: []attr{{"name", `a"b`}}}}},
		"17 attributes":    {name: "system", subs: []*element{many}},
	}
	for name, e := range tests {
		t.Run(name, func(t *testing.T) {
			if b, err := e.marshal(); err == nil {
				t.Errorf("marshal = %q, want an error", b)
			}
		})
	}
}

func FuzzParseModalias(f *testing.F) {
	f.Add(modaliasSPR)
	f.Add("cpu:type:aarch64:feature:,0000")
	f.Add("cpu:type:x86,ven0002fam0019mod0011:feature:")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseModalias(s)
		if err != nil {
			if !errors.Is(err, sysfs.ErrSyntax) {
				t.Errorf("error %v is not an ErrSyntax", err)
			}
			return
		}
		for _, a := range c.attrs() {
			if err := checkValue(a.value); err != nil {
				t.Errorf("parseModalias(%q) gives attribute %s=%q: %v", s, a.key, a.value, err)
			}
		}
	})
}

func FuzzParseCPUMap(f *testing.F) {
	f.Add("00000000,0000ffff,ffffffff")
	f.Add("ffffffff")
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseCPUMap(s)
		if err != nil {
			if !errors.Is(err, sysfs.ErrSyntax) {
				t.Errorf("error %v is not an ErrSyntax", err)
			}
			return
		}
		if !cpuMaskRE.MatchString(m) || !strings.HasSuffix(s, m) {
			t.Errorf("parseCPUMap(%q) = %q: not a mask, or not a suffix of the input", s, m)
		}
	})
}

func FuzzCheckBusID(f *testing.F) {
	f.Add("0000:3b:00.0")
	f.Add("10000:e1:00.0")
	f.Fuzz(func(t *testing.T, s string) {
		if checkBusID(s) != nil {
			return
		}
		// A bus ID that passes is a plain path component and a safe attribute value.
		if strings.Contains(s, "/") || checkValue(s) != nil {
			t.Errorf("checkBusID accepted %q", s)
		}
	})
}

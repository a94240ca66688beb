package sysfs

import (
	"errors"
	"strings"
	"testing"
)

func TestParsePortState(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "4: ACTIVE", want: "ACTIVE"},
		{in: "1: DOWN", want: "DOWN"},
		{in: "0: NOP", want: "NOP"},
		{in: "5: ACTIVE_DEFER", want: "ACTIVE_DEFER"},
		{in: "3: ACTIVE", wantErr: true}, // number and name disagree
		{in: "4:ACTIVE", wantErr: true},
		{in: "ACTIVE", wantErr: true},
		{in: "9: BOGUS", wantErr: true},
		{in: "-1: DOWN", wantErr: true},
		{in: "4: ACTIVE ", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePortState(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParsePhysState(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "5: LinkUp", want: "LinkUp"},
		{in: "3: Disabled", want: "Disabled"},
		{in: "2: Polling", want: "Polling"},
		{in: "7: Phy Test", want: "Phy Test"},
		{in: "4: PortConfigurationTraining", want: "PortConfigurationTraining"},
		{in: "0: Sleep", wantErr: true},
		{in: "5: linkup", wantErr: true},
		{in: "8: <unknown>", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePhysState(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseNodeType(t *testing.T) {
	tests := []struct {
		in      string
		want    NodeType
		wantErr bool
	}{
		{in: "1: CA", want: NodeType{Code: 1, Name: "CA"}},
		{in: "4: RNIC", want: NodeType{Code: 4, Name: "RNIC"}},
		{in: "CA", wantErr: true},
		{in: "1: ", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseNodeType(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "400 Gb/sec (4X NDR)", want: 400},
		{in: "200 Gb/sec (4X HDR)", want: 200},
		{in: "2.5 Gb/sec (1X SDR)", want: 2},
		{in: "12.5 Gb/sec (1X QDR)", want: 12},
		{in: "25 Gb/sec (1X EDR)", want: 25},
		{in: "100 Gb/sec", want: 100},
		{in: "800 Gb/sec (8X XDR)", want: 800},
		{in: "800 Gb/sec (4X XDR)", want: 800}, // a ConnectX-8 XDR port: four 200 Gb/s lanes
		{in: "Gb/sec (4X NDR)", wantErr: true},
		{in: "400Gb/sec (4X NDR)", wantErr: true},
		{in: "400 Gb/s (4X NDR)", wantErr: true},
		{in: "400 Gb/sec (NDR)", wantErr: true},
		{in: "400 Gb/sec (4X NDR", wantErr: true},
		{in: "2. Gb/sec (1X SDR)", wantErr: true},
		{in: "-4 Gb/sec (1X SDR)", wantErr: true},
		{in: "99999999999999999999 Gb/sec (1X SDR)", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRate(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseLinkLayer(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "InfiniBand", want: LinkLayerInfiniBand},
		{in: "Ethernet", want: LinkLayerEthernet},
		{in: "Unknown", want: LinkLayerUnknown},
		{in: "ethernet", wantErr: true},
		{in: "IB", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLinkLayer(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseDevNumber(t *testing.T) {
	tests := []struct {
		in      string
		want    DevNumber
		wantErr bool
	}{
		{in: "231:192", want: DevNumber{Major: 231, Minor: 192}},
		{in: "231:0", want: DevNumber{Major: 231, Minor: 0}},
		{in: "4095:1048575", want: DevNumber{Major: 4095, Minor: 1048575}},
		{in: "4096:0", wantErr: true},
		{in: "1:1048576", wantErr: true},
		{in: "231", wantErr: true},
		{in: "231:", wantErr: true},
		{in: ":1", wantErr: true},
		{in: "a:b", wantErr: true},
		{in: "231:1:2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDevNumber(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
	if got := (DevNumber{Major: 231, Minor: 64}).String(); got != "231:64" {
		t.Errorf("String() = %q, want 231:64", got)
	}
}

func TestParsePCIID(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "0x15b3", want: "15b3"},
		{in: "0x101B", want: "101b"},
		{in: "15b3", wantErr: true},
		{in: "0x15b", wantErr: true},
		{in: "0x15b33", wantErr: true},
		{in: "0xzzzz", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePCIID(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParsePCIClass(t *testing.T) {
	tests := []struct {
		in      string
		want    uint32
		wantErr bool
	}{
		{in: "0x020700", want: 0x020700},
		{in: "0x020000", want: 0x020000},
		{in: "0x0207", wantErr: true},
		{in: "020700", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePCIClass(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseNUMANode(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantOK  bool
		wantErr bool
	}{
		{in: "0", want: 0, wantOK: true},
		{in: "3", want: 3, wantOK: true},
		{in: "-1", wantOK: false},
		{in: "-2", wantErr: true},
		{in: "", wantErr: true},
		{in: "one", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, ok, err := ParseNUMANode(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseNUMANode(%q) error = %v, wantErr %v", tt.in, err, tt.wantErr)
			}
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseNUMANode(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseGUID(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "7c8c:0903:00c3:cfee", want: "7c8c:0903:00c3:cfee"},
		{in: "7C8C:0903:00C3:CFEE", want: "7c8c:0903:00c3:cfee"},
		{in: "7c8c09:03:00c3:cfee", wantErr: true},
		{in: "7c8c:0903:00c3:cfe", wantErr: true},
		{in: "7c8c:0903:00c3:cfeg", wantErr: true},
		{in: "7c8c0903:00c3:cfee", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGUID(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseBondSlaves(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "eth0a eth0b", want: []string{"eth0a", "eth0b"}},
		{in: "ens1f0np0", want: []string{"ens1f0np0"}},
		{in: "", want: []string{}},
		{in: "eth0 ../x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseBondSlaves(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, wantErr %v", err, tt.wantErr)
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseNetnsMode(t *testing.T) {
	tests := []struct {
		in      string
		want    bool
		wantErr bool
	}{
		{in: "Y", want: true},
		{in: "N", want: false},
		{in: "y", wantErr: true},
		{in: "1", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseNetnsMode(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseLID(t *testing.T) {
	tests := []struct {
		in      string
		want    uint16
		wantErr bool
	}{
		{in: "0x538", want: 0x538},
		{in: "0x0", want: 0},
		{in: "0xffff", want: 0xffff},
		{in: "0x10000", wantErr: true},
		{in: "538", wantErr: true},
		{in: "0x", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseLID(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseDecimal(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{in: "4096", want: 4096},
		{in: "0", want: 0},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1500\n", wantErr: true},
		{in: "1234567890", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseDecimal(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestParseCounter(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "255", want: 255},
		{in: "237159415345822", want: 237159415345822},
		{in: "18446744073709551615", want: 1<<64 - 1},
		{in: "18446744073709551616", wantErr: true}, // one more than 64 bits hold
		{in: "99999999999999999999", wantErr: true},
		{in: "000000000000000000001", wantErr: true}, // longer than any value the kernel prints
		{in: "N/A (no PMA)", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "+1", wantErr: true},
		{in: " 1", wantErr: true},
		{in: "1\n", wantErr: true},
		{in: "0x10", wantErr: true},
		{in: "", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCounter(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
			// The bytes of a read parse the same.
			gotBytes, errBytes := ParseCounter([]byte(tt.in))
			if gotBytes != got || (errBytes == nil) != (err == nil) {
				t.Errorf("ParseCounter([]byte(%q)) = %d, %v; the string gives %d, %v", tt.in, gotBytes, errBytes, got, err)
			}
		})
	}
}

func TestParseNames(t *testing.T) {
	long := strings.Repeat("a", 16)
	tests := []struct {
		in          string
		ifOK, devOK bool
	}{
		{in: "bond0", ifOK: true, devOK: true},
		{in: "ens1f0np0", ifOK: true, devOK: true},
		{in: long, ifOK: false, devOK: true},
		{in: "..", ifOK: false, devOK: false},
		{in: "a/b", ifOK: false, devOK: false},
		{in: "eth0:1", ifOK: false, devOK: false},
		{in: "eth 0", ifOK: false, devOK: false},
		{in: "", ifOK: false, devOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			if _, err := ParseIfName(tt.in); (err == nil) != tt.ifOK {
				t.Errorf("ParseIfName(%q) error = %v, want ok %v", tt.in, err, tt.ifOK)
			}
			if _, err := ParseDeviceName(tt.in); (err == nil) != tt.devOK {
				t.Errorf("ParseDeviceName(%q) error = %v, want ok %v", tt.in, err, tt.devOK)
			}
		})
	}
}

func TestSyntaxErrorNamesContent(t *testing.T) {
	_, err := ParseRate("fast")
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), `"fast"`) {
		t.Errorf("ParseRate error = %v, want ErrSyntax naming the content", err)
	}
}

// checkParse compares one parser result with the expectation of a table row.
func checkParse[T comparable](t *testing.T, in string, got T, err error, want T, wantErr bool) {
	t.Helper()
	if wantErr {
		if err == nil {
			t.Fatalf("parse %q = %v, want an error", in, got)
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("parse %q error = %v, want it to wrap ErrSyntax", in, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("parse %q: unexpected error %v", in, err)
	}
	if got != want {
		t.Errorf("parse %q = %v, want %v", in, got, want)
	}
}

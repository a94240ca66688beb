package sysfs

import (
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// large is a large VPD resource: tag, 16-bit little-endian length, data.
func large(tag byte, data []byte) []byte {
	out := []byte{tag, 0, 0}
	binary.LittleEndian.PutUint16(out[1:], uint16(len(data)))
	return append(out, data...)
}

// field is one keyword of a VPD section.
func field(kw, value string) []byte {
	return append([]byte{kw[0], kw[1], byte(len(value))}, value...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// cx8VPD is laid out as NVIDIA adapters lay out theirs (lspci -vv shows the same
// keywords): identifier string, then PN, SN, V3, VU and RV in the read-only section.
func cx8VPD() []byte {
	return cat(
		large(0x82, []byte("NVIDIA ConnectX-8 SuperNIC  ")),
		large(0x90, cat(field("PN", "900-9X81Q-00CN-ST0"), field("SN", "MT2503X00012   "),
			field("V3", "5b0e6f1c2d8aef118000a088c2ec0001"), field("VU", "MT2503X00012MLNXS0D0F0"), field("RV", "\x42"))),
		[]byte{0x78},
	)
}

func TestParseVPD(t *testing.T) {
	good := cx8VPD()
	tests := []struct {
		name    string
		in      []byte
		want    *VPD
		wantErr string
	}{
		{name: "adapter", in: good, want: &VPD{Name: "NVIDIA ConnectX-8 SuperNIC", ReadOnly: []VPDField{
			{"PN", []byte("900-9X81Q-00CN-ST0")}, {"SN", []byte("MT2503X00012   ")}, {"V3", []byte("5b0e6f1c2d8aef118000a088c2ec0001")},
			{"VU", []byte("MT2503X00012MLNXS0D0F0")}, {"RV", []byte{0x42}},
		}}},
		{name: "data after the end tag is ignored", in: append(append([]byte(nil), good...), 0xff, 0xff, 0x00),
			want: &VPD{Name: "NVIDIA ConnectX-8 SuperNIC", ReadOnly: mustParse(t, good).ReadOnly}},
		{name: "read-write section and a small resource are skipped",
			in:   cat(large(0x90, field("V3", "abc")), large(0x91, field("RW", "\x00\x00")), []byte{0x71, 0x01}, []byte{0x78}),
			want: &VPD{ReadOnly: []VPDField{{"V3", []byte("abc")}}}},
		{name: "end tag only", in: []byte{0x78}, want: &VPD{}},
		{name: "empty", in: nil, wantErr: "no end tag"},
		{name: "no end tag", in: good[:len(good)-1], wantErr: "no end tag"},
		{name: "truncated inside the read-only section", in: good[:40], wantErr: "runs past the end of the data"},
		{name: "large tag without length", in: []byte{0x82, 0x01}, wantErr: "has no length"},
		{name: "small resource past the end", in: []byte{0x73, 0x01}, wantErr: "small resource"},
		{name: "field past its section", in: cat(large(0x90, []byte{'V', '3', 9, 'a'}), []byte{0x78}), wantErr: "keyword V3 of 9 bytes"},
		{name: "field header past its section", in: cat(large(0x90, []byte{'V', '3'}), []byte{0x78}), wantErr: "field header"},
		{name: "keyword not alphanumeric", in: cat(large(0x90, field("v3", "x")), []byte{0x78}), wantErr: "not two letters or digits"},
		{name: "two read-only sections", in: cat(large(0x90, field("V3", "a")), large(0x90, field("V3", "b")), []byte{0x78}), wantErr: "second read-only section"},
		{name: "two identifier strings", in: cat(large(0x82, []byte("a")), large(0x82, []byte("b")), []byte{0x78}), wantErr: "second identifier string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseVPD(tt.in)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseVPD error = %v, want ErrSyntax with %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseVPD (-want +got):\n%s", diff)
			}
		})
	}
}

func mustParse(t *testing.T, b []byte) *VPD {
	t.Helper()
	v, err := ParseVPD(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestVPDKeyword(t *testing.T) {
	v := mustParse(t, cx8VPD())
	for kw, want := range map[string]string{"SN": "MT2503X00012", "V3": "5b0e6f1c2d8aef118000a088c2ec0001", "VU": "MT2503X00012MLNXS0D0F0"} {
		if got, ok := v.Keyword(kw); !ok || got != want {
			t.Errorf("Keyword(%s) = %q, %v; want %q", kw, got, ok, want)
		}
	}
	if got, ok := v.Keyword("V9"); ok {
		t.Errorf("Keyword(V9) = %q, true; want absent", got)
	}
}

func TestReadBytes(t *testing.T) {
	vpd := append(cx8VPD(), '\n') // a trailing newline byte is data here, not a line end
	f := NewFS(fstest.MapFS{
		"devices/pci0000:00/0000:00:01.0/vpd":  {Data: vpd, Mode: 0o400},
		"bus/pci/devices/0000:00:01.0":         linkFile("../../../devices/pci0000:00/0000:00:01.0"),
		"devices/pci0000:00/0000:00:02.0/huge": {Data: make([]byte, maxFileSize+1), Mode: 0o400},
	})
	got, err := f.ReadBytes("bus/pci/devices/0000:00:01.0/vpd")
	if err != nil || string(got) != string(vpd) {
		t.Errorf("ReadBytes = %d bytes, %v; want the %d bytes as written", len(got), err, len(vpd))
	}
	if _, err := f.ReadBytes("devices/pci0000:00/0000:00:02.0/huge"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ReadBytes of an oversized file: %v, want an error", err)
	}
	if _, err := f.ReadBytes("bus/pci/devices/0000:00:03.0/vpd"); err == nil {
		t.Error("ReadBytes of a missing file succeeded")
	}
}

func TestParseTaint(t *testing.T) {
	tests := []struct {
		in, want string
		wantErr  bool
	}{
		{in: "POE", want: "POE"},
		{in: "O", want: "O"},
		{in: "", want: ""},
		{in: "po", wantErr: true},
		{in: "P O", wantErr: true},
		{in: "P\x00", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTaint(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

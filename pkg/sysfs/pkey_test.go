package sysfs

import (
	"errors"
	"io/fs"
	"testing"
	"testing/fstest"
)

func TestParsePKey(t *testing.T) {
	for _, tt := range []struct {
		in      string
		want    uint16
		wantErr bool
	}{
		{in: "0xffff", want: 0xffff},
		{in: "0x8001", want: 0x8001},
		{in: "0x0000", want: 0},
		{in: "0x7", want: 7},
		{in: "0xFFFF", want: 0xffff},
		{in: "ffff", wantErr: true},
		{in: "0x", wantErr: true},
		{in: "0x12345", wantErr: true},
		{in: "0xgg", wantErr: true},
		{in: "0x+1", wantErr: true},
		{in: "", wantErr: true},
	} {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePKey(tt.in)
			checkParse(t, tt.in, got, err, tt.want, tt.wantErr)
		})
	}
}

func TestPKeyAdmits(t *testing.T) {
	for _, tt := range []struct {
		name        string
		entry, want uint16
		admits      bool
	}{
		{"full entry, full want", 0x8001, 0x8001, true},
		{"full entry, limited want", 0x8001, 0x0001, true},
		{"limited entry, limited want", 0x0001, 0x0001, true},
		{"limited entry, full want", 0x0001, 0x8001, false},
		{"another partition", 0x8002, 0x8001, false},
		{"unused entry", 0x0000, 0x0000, false},
		{"unused entry and the bare membership bit", 0x0000, 0x8000, false},
		{"default partition", 0xffff, 0x7fff, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := PKeyAdmits(tt.entry, tt.want); got != tt.admits {
				t.Errorf("PKeyAdmits(%#04x, %#04x) = %v, want %v", tt.entry, tt.want, got, tt.admits)
			}
		})
	}
}

// pkeyTree is a port whose P_Key table has the given files below pkeys/.
func pkeyTree(files map[string]string) *FS {
	m := fstest.MapFS{"port/state": textFile("4: ACTIVE")}
	for name, data := range files {
		m["port/pkeys/"+name] = textFile(data)
	}
	return NewFS(m)
}

func TestReadPKeyTable(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		want    string // the table as PKeyTable.String writes it
		wantErr error
	}{
		{name: "default table", files: map[string]string{"0": "0xffff"}, want: "[0]=0xffff"},
		{name: "unused entries left out, numeric order", files: map[string]string{"0": "0xffff", "1": "0x0000", "2": "0x8001", "10": "0x8002"},
			want: "[0]=0xffff [2]=0x8001 [10]=0x8002"},
		{name: "names that are not indices are skipped", files: map[string]string{"0": "0xffff", "01": "0x8001", "x": "0x8002"}, want: "[0]=0xffff"},
		{name: "all unused", files: map[string]string{"0": "0x0000"}, want: "empty"},
		{name: "a garbled entry fails the table", files: map[string]string{"0": "0xffff", "1": "8001"}, wantErr: ErrSyntax},
		{name: "no pkeys directory", wantErr: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadPKeyTable(pkeyTree(tt.files), "port")
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("ReadPKeyTable = %v, %v; want an error wrapping %v", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tt.want {
				t.Errorf("ReadPKeyTable = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPKeyTableIndex(t *testing.T) {
	table := PKeyTable{{0, 0xffff}, {2, 0x0005}, {3, 0x8001}, {7, 0x8005}}
	for _, tt := range []struct {
		name  string
		want  uint16
		index int
		found bool
	}{
		{"the default partition", 0xffff, 0, true},
		{"a full key", 0x8001, 3, true},
		{"a limited key takes a full entry", 0x0001, 3, true},
		{"a limited key: the lowest entry that serves it", 0x0005, 2, true},
		{"a full key skips a limited entry", 0x8005, 7, true},
		{"absent", 0x8009, 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			index, found := table.Index(tt.want)
			if index != tt.index || found != tt.found {
				t.Errorf("Index(%#04x) = %d, %v; want %d, %v", tt.want, index, found, tt.index, tt.found)
			}
		})
	}
}

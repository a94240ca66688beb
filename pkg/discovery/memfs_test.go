package discovery

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// loadMapFS copies a tree on disk into memory, links as links.
func loadMapFS(t *testing.T, root string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			m[rel] = &fstest.MapFile{Data: []byte(target), Mode: fs.ModeSymlink | 0o777}
		case d.IsDir():
			m[rel] = &fstest.MapFile{Mode: fs.ModeDir | 0o755}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[rel] = &fstest.MapFile{Data: b, Mode: 0o444}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestDiscoverInMemory checks that an in-memory tree (Options.FS) gives the same
// inventory as the same tree on disk, whose files are read through another code path.
func TestDiscoverInMemory(t *testing.T) {
	root := writeNode(t, mixedNode())
	inv, err := New(Options{FS: loadMapFS(t, root)}).Discover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantMixed(), inv.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	if inv.NetnsMode != NetnsModeShared {
		t.Errorf("NetnsMode = %q, want shared", inv.NetnsMode)
	}
}

func TestModelName(t *testing.T) {
	tests := []struct {
		vendor, device, pf, want string
	}{
		{vendor: VendorMellanox, device: "1021", want: "ConnectX-7"},
		{vendor: VendorMellanox, device: "1023", want: "ConnectX-8"},
		{vendor: VendorMellanox, device: "1007", want: "ConnectX-3 Pro"},
		{vendor: VendorMellanox, device: "1015", want: "ConnectX-4 Lx"},
		{vendor: VendorMellanox, device: "1019", want: "ConnectX-5 Ex"},
		{vendor: VendorMellanox, device: "101f", want: "ConnectX-6 Lx"},
		{vendor: VendorMellanox, device: "1018", want: "ConnectX-5 VF"},
		{vendor: VendorMellanox, device: "101e", want: "ConnectX VF"},
		{vendor: VendorMellanox, device: "101e", pf: "ConnectX-7", want: "ConnectX-7 VF"},
		{vendor: VendorMellanox, device: "a2dc", want: "BlueField-3"},
		{vendor: VendorMellanox, device: "a2d6", want: "BlueField-2"},
		{vendor: VendorIntel, device: "1592", want: "E810-C"},
		{vendor: VendorIntel, device: "159b", want: "E810-XXV"},
		{vendor: VendorBroadcom, device: "1750", want: "NetXtreme-E BCM57508"},
		{vendor: VendorBroadcom, device: "16d7", want: "NetXtreme-E BCM57414"},
		{vendor: VendorMellanox, device: "ffff", want: ""},
		{vendor: "1af4", device: "1041", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.vendor+":"+tt.device+"/"+tt.pf, func(t *testing.T) {
			if got := modelName(tt.vendor, tt.device, tt.pf); got != tt.want {
				t.Errorf("modelName = %q, want %q", got, tt.want)
			}
		})
	}
}

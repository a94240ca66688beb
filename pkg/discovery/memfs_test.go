package discovery_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
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

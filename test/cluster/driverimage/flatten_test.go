package driverimage

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
)

// Entry types of fsEntry.
const (
	typeDir     = "dir"
	typeReg     = "file"
	typeSymlink = "symlink"
)

// fsEntry is what the comparisons look at of one entry of an image's final filesystem.
type fsEntry struct {
	Type string
	// Mode is octal, "0755", so that a diff reads as ls would.
	Mode     string
	UID, GID int
	// Digest is the sha256 of a regular file's content; Link a symlink's target.
	Digest, Link string
}

// flatten returns the final filesystem of img (its layers applied in order, as a runtime
// sees it), by entry name: "usr/bin/x", directories with a trailing slash.
func flatten(t *testing.T, img v1.Image) map[string]fsEntry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]fsEntry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read the image's filesystem: %v", err)
		}
		e := fsEntry{Mode: octal(h.Mode), UID: h.Uid, GID: h.Gid}
		name := h.Name
		switch h.Typeflag {
		case tar.TypeDir:
			e.Type = typeDir
			if name[len(name)-1] != '/' {
				name += "/"
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatalf("read %s: %v", name, err)
			}
			e.Type, e.Digest = typeReg, digestOf(string(b))
		case tar.TypeSymlink:
			e.Type, e.Link = typeSymlink, h.Linkname
		default:
			e.Type = string(h.Typeflag)
		}
		out[trimDot(name)] = e
	}
}

// trimDot drops the "./" some engines put before every name.
func trimDot(name string) string {
	for len(name) > 2 && name[:2] == "./" {
		name = name[2:]
	}
	return name
}

// octal formats the permission and special bits of a tar mode.
func octal[M ~int64 | ~uint32](m M) string { return fmt.Sprintf("%04o", int64(m)&0o7777) }

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

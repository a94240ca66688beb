package ociimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// buildLayer returns the uncompressed layer tar of img's files, with parent directories
// added where the list does not name them.
func buildLayer(img Image) ([]byte, error) {
	files, err := layerFiles(img.Files)
	if err != nil {
		return nil, err
	}
	mtime := stamp(img.Created)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr, data, err := layerEntry(f, mtime)
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.Path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
}

// layerFiles checks files and returns them in path order with their paths in the layer's
// relative form and the parent directories the list does not name added.
func layerFiles(files []File) ([]File, error) {
	byPath := map[string]File{}
	for _, f := range files {
		p, err := cleanPath(f.Path)
		if err != nil {
			return nil, err
		}
		set := 0
		for _, b := range []bool{f.HostPath != "", f.Content != nil, f.Symlink != "", f.Dir} {
			if b {
				set++
			}
		}
		if set != 1 {
			return nil, fmt.Errorf("file %s: exactly one of HostPath, Content, Symlink, Dir must be set", f.Path)
		}
		if _, dup := byPath[p]; dup {
			return nil, fmt.Errorf("file %s listed twice", f.Path)
		}
		f.Path = p
		byPath[p] = f
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Dir: true}
			}
		}
	}
	for p, f := range byPath {
		if !f.Dir && hasChild(byPath, p) {
			return nil, fmt.Errorf("file %s is also a parent directory", p)
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	out := make([]File, 0, len(paths))
	for _, p := range paths {
		out = append(out, byPath[p])
	}
	return out, nil
}

// layerEntry is the tar header and content of one file of layerFiles; a host file is
// read here.
func layerEntry(f File, mtime time.Time) (*tar.Header, []byte, error) {
	p := f.Path
	hdr := &tar.Header{Name: p, ModTime: mtime, Uid: f.UID, Gid: f.GID, Format: tar.FormatPAX}
	if f.UID == 0 {
		hdr.Uname = "root"
	}
	if f.GID == 0 {
		hdr.Gname = "root"
	}
	var data []byte
	switch {
	case f.Dir:
		hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, p+"/", int64(orMode(f.Mode, 0o755))
	case f.Symlink != "":
		hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, f.Symlink, 0o777
	case f.Content != nil:
		hdr.Typeflag, hdr.Mode = tar.TypeReg, int64(orMode(f.Mode, 0o644))
		data = f.Content
	default:
		st, err := os.Stat(f.HostPath)
		if err != nil {
			return nil, nil, fmt.Errorf("file %s: %w", p, err)
		}
		if !st.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("file %s: host path %s is not a regular file", p, f.HostPath)
		}
		def := fs.FileMode(0o644)
		if st.Mode()&0o111 != 0 {
			def = 0o755
		}
		data, err = os.ReadFile(f.HostPath)
		if err != nil {
			return nil, nil, fmt.Errorf("file %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Mode = tar.TypeReg, int64(orMode(f.Mode, def))
	}
	hdr.Size = int64(len(data))
	return hdr, data, nil
}

// cleanPath turns an absolute image path into the relative form used in the layer tar.
func cleanPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", fmt.Errorf("image path %q is not absolute", p)
	}
	c := strings.TrimPrefix(path.Clean(p), "/")
	if c == "" {
		return "", fmt.Errorf("image path %q names the root", p)
	}
	return c, nil
}

func hasChild(byPath map[string]File, dir string) bool {
	for p := range byPath {
		if strings.HasPrefix(p, dir+"/") {
			return true
		}
	}
	return false
}

// orMode returns m's permission and special bits as tar stores them (0o7777), or def
// when m is zero. Both spellings of the special bits are accepted: the raw octal 0o1777
// and Go's fs.ModeSticky|0o777.
func orMode(m, def fs.FileMode) fs.FileMode {
	if m == 0 {
		return def
	}
	out := m & 0o7777
	for goBit, tarBit := range map[fs.FileMode]fs.FileMode{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if m&goBit != 0 {
			out |= tarBit
		}
	}
	return out
}

func stamp(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t
}

package ociimage

import (
	"archive/tar"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

func TestLayerFiles(t *testing.T) {
	files, err := layerFiles([]File{
		{Path: "/usr/", Dir: true, Mode: 0o700},
		{Path: "/usr/bin/tool", Content: []byte("x")},
		{Path: "/etc/passwd", Content: []byte("root")},
		{Path: "/bin", Symlink: "usr/bin"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: "bin", Symlink: "usr/bin"},
		{Path: "etc", Dir: true},
		{Path: "etc/passwd", Content: []byte("root")},
		{Path: "usr", Dir: true, Mode: 0o700},
		{Path: "usr/bin", Dir: true},
		{Path: "usr/bin/tool", Content: []byte("x")},
	}
	if !reflect.DeepEqual(files, want) {
		t.Errorf("layerFiles =\n%+v\nwant (in path order, parents added, a listed directory kept as listed)\n%+v", files, want)
	}
}

func TestLayerEntry(t *testing.T) {
	dir := t.TempDir()
	exe, plain := filepath.Join(dir, "exe"), filepath.Join(dir, "plain")
	if err := os.WriteFile(exe, []byte("#!x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(plain, []byte("data"), 0o600); err != nil {
		t.Fatal(err)
	}
	mtime := time.Unix(1700000000, 0).UTC()
	tests := []struct {
		name string
		file File
		want tar.Header
		data string
	}{
		{"directory", File{Path: "tmp", Dir: true, Mode: fs.ModeSticky | 0o777},
			tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777, Uname: "root", Gname: "root"}, ""},
		{"symlink", File{Path: "bin", Symlink: "usr/bin"},
			tar.Header{Typeflag: tar.TypeSymlink, Name: "bin", Linkname: "usr/bin", Mode: 0o777, Uname: "root", Gname: "root"}, ""},
		{"content owned by a user", File{Path: "home/u/f", Content: []byte("hi"), UID: 1000, GID: 1000},
			tar.Header{Typeflag: tar.TypeReg, Name: "home/u/f", Mode: 0o644, Uid: 1000, Gid: 1000, Size: 2}, "hi"},
		{"executable host file", File{Path: "bin/exe", HostPath: exe},
			tar.Header{Typeflag: tar.TypeReg, Name: "bin/exe", Mode: 0o755, Uname: "root", Gname: "root", Size: 3}, "#!x"},
		{"host file with a mode", File{Path: "etc/plain", HostPath: plain, Mode: 0o640},
			tar.Header{Typeflag: tar.TypeReg, Name: "etc/plain", Mode: 0o640, Uname: "root", Gname: "root", Size: 4}, "data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hdr, data, err := layerEntry(tc.file, mtime)
			if err != nil {
				t.Fatal(err)
			}
			tc.want.ModTime, tc.want.Format = mtime, tar.FormatPAX
			if !reflect.DeepEqual(*hdr, tc.want) {
				t.Errorf("header = %+v, want %+v", *hdr, tc.want)
			}
			if string(data) != tc.data {
				t.Errorf("content = %q, want %q", data, tc.data)
			}
		})
	}
}

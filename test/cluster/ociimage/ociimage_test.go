package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// entry is what a test expects of one tar member.
type entry struct {
	typ  byte
	mode int64
	data string
	link string
}

func readTar(t *testing.T, r io.Reader) map[string]entry {
	t.Helper()
	out := map[string]entry{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", h.Name, err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want 0:0", h.Name, h.Uid, h.Gid)
		}
		out[h.Name] = entry{typ: h.Typeflag, mode: h.Mode, data: string(b), link: h.Linkname}
	}
}

// openArchive writes archive to a file, reads it back with ReadArchive and returns its one
// index entry, the image's config and the layer's members. go-containerregistry checks every
// digest and size on the way (validate.Image).
func openArchive(t *testing.T, archive []byte) (v1.Descriptor, *v1.ConfigFile, map[string]entry) {
	t.Helper()
	dir := t.TempDir()
	outer := readTar(t, bytes.NewReader(archive))
	var layoutFile struct {
		Version string `json:"imageLayoutVersion"`
	}
	if err := json.Unmarshal([]byte(outer["oci-layout"].data), &layoutFile); err != nil || layoutFile.Version != "1.0.0" {
		t.Fatalf("oci-layout = %q (%v)", outer["oci-layout"].data, err)
	}
	path := filepath.Join(dir, "img.tar")
	if err := os.WriteFile(path, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := ReadArchive(path, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatalf("ReadArchive: %v", err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index has %d manifests, want 1", len(im.Manifests))
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatalf("image: %v", err)
	}
	if err := validate.Image(img); err != nil {
		t.Fatalf("image does not validate: %v", err)
	}
	man, err := img.Manifest()
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if man.MediaType != types.OCIManifestSchema1 || man.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("media types = %s, config %s; want OCI ones", man.MediaType, man.Config.MediaType)
	}
	if len(man.Layers) != 1 || man.Layers[0].MediaType != types.OCILayer {
		t.Fatalf("layers = %+v", man.Layers)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatalf("gunzip layer: %v", err)
	}
	defer rc.Close()
	return im.Manifests[0], cfg, readTar(t, rc)
}

func TestWriteArchive(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "tool")
	if err := os.WriteFile(exe, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := Image{
		Name: "localhost/toolbox:v1",
		Files: []File{
			{Path: "/bin/tool", HostPath: exe},
			{Path: "/bin/sh", Symlink: "tool"},
			{Path: "/etc/motd", Content: []byte("hi\n"), Mode: 0o600},
			{Path: "/tmp", Dir: true, Mode: 0o1777},
		},
		Entrypoint: []string{"/bin/sh"},
		Env:        []string{"PATH=/bin"},
		Labels:     map[string]string{"a": "b"},
	}
	var buf bytes.Buffer
	if err := WriteArchive(&buf, img); err != nil {
		t.Fatalf("WriteArchive: %v", err)
	}
	desc, cfg, layer := openArchive(t, buf.Bytes())

	ann := desc.Annotations
	if ann[AnnotationContainerdName] != "localhost/toolbox:v1" || ann[AnnotationRefName] != "v1" {
		t.Errorf("annotations = %v", ann)
	}
	if desc.Platform == nil || desc.Platform.OS != "linux" || desc.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index entry platform = %+v", desc.Platform)
	}
	if cfg.OS != "linux" || cfg.Config.Entrypoint[0] != "/bin/sh" || cfg.Config.Labels["a"] != "b" {
		t.Errorf("config = %+v", cfg)
	}
	want := map[string]entry{
		"bin/":     {typ: tar.TypeDir, mode: 0o755},
		"bin/tool": {typ: tar.TypeReg, mode: 0o755, data: "#!binary"},
		"bin/sh":   {typ: tar.TypeSymlink, mode: 0o777, link: "tool"},
		"etc/":     {typ: tar.TypeDir, mode: 0o755},
		"etc/motd": {typ: tar.TypeReg, mode: 0o600, data: "hi\n"},
		"tmp/":     {typ: tar.TypeDir, mode: 0o1777},
	}
	if len(layer) != len(want) {
		t.Errorf("layer has %d entries, want %d: %v", len(layer), len(want), layer)
	}
	for name, w := range want {
		if got, ok := layer[name]; !ok || got != w {
			t.Errorf("layer[%s] = %+v (present %v), want %+v", name, got, ok, w)
		}
	}

	var again bytes.Buffer
	if err := WriteArchive(&again, img); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("two writes of the same image differ; output must be reproducible")
	}
}

func TestWriteArchiveErrors(t *testing.T) {
	tests := []struct {
		name  string
		files []File
		want  string
	}{
		{"relative path", []File{{Path: "bin/x", Content: []byte{}}}, "not absolute"},
		{"nothing set", []File{{Path: "/x"}}, "exactly one"},
		{"two set", []File{{Path: "/x", Content: []byte{}, Symlink: "y"}}, "exactly one"},
		{"duplicate", []File{{Path: "/x", Dir: true}, {Path: "/x/", Dir: true}}, "twice"},
		{"file as parent", []File{{Path: "/x", Content: []byte{}}, {Path: "/x/y", Content: []byte{}}}, "parent directory"},
		{"missing host file", []File{{Path: "/x", HostPath: "/does/not/exist"}}, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := WriteArchive(io.Discard, Image{Name: "x", Files: tc.files})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestTagOf(t *testing.T) {
	for in, want := range map[string]string{
		"localhost/toolbox:latest":   "latest",
		"localhost:5000/toolbox":     "latest",
		"localhost:5000/toolbox:dev": "dev",
		"toolbox@sha256:abc":         "latest",
	} {
		if got := tagOf(in); got != want {
			t.Errorf("tagOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestImportWithCtr imports an archive into a running containerd when
// OCIIMAGE_TEST_CTR="<ctr binary> <containerd socket>" is set (the local cluster sets it up).
func TestImportWithCtr(t *testing.T) {
	spec := strings.Fields(os.Getenv("OCIIMAGE_TEST_CTR"))
	if len(spec) != 2 {
		t.Skip(`set OCIIMAGE_TEST_CTR="<ctr> <containerd socket>" to import into a live containerd`)
	}
	path := filepath.Join(t.TempDir(), "img.tar")
	name := "localhost/ociimage-test:latest"
	if err := WriteArchiveFile(path, Image{Name: name, Files: []File{{Path: "/hello", Content: []byte("hi")}}}); err != nil {
		t.Fatal(err)
	}
	ctr := func(args ...string) string {
		out, err := exec.Command(spec[0], append([]string{"--address", spec[1], "-n", "ociimage-test"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	ctr("images", "import", path)
	defer ctr("images", "rm", name)
	if out := ctr("images", "ls", "-q"); !strings.Contains(out, name) {
		t.Fatalf("image %s not listed after import:\n%s", name, out)
	}
}

package driverimage

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// repoContainerfile is the repository's Containerfile, the one source of the layout.
const repoContainerfile = "../../../Containerfile"

func TestParseContainerfile(t *testing.T) {
	const header = `# Image.
#
# Final-stage layout. Some words:
#
#   path                 mode  owner  from
#   /usr/bin/a           0755  0:0    cmd/a
#   /usr/bin/b           0750  0:0    cmd/b (a note that
#                                     goes on)
#   /usr/bin/c           0755  0:0    cmd/c, only if present
#   /etc/passwd, /tmp (1777)
#                                     from the base
#
# Config: Entrypoint none, Cmd ["/usr/bin/a", "-v"], WorkingDir "/",
# User "0:0". More words.
#
# Build: podman build

FROM scratch
# /usr/bin/z 0755 0:0 cmd/z is after the header and ignored
`
	tests := []struct {
		name    string
		text    string
		want    Layout
		wantErr string
	}{
		{
			name: "full header",
			text: header,
			want: Layout{
				Binaries: []Binary{
					{Path: "/usr/bin/a", Mode: 0o755, Owner: "0:0", Package: "cmd/a"},
					{Path: "/usr/bin/b", Mode: 0o750, Owner: "0:0", Package: "cmd/b"},
					{Path: "/usr/bin/c", Mode: 0o755, Owner: "0:0", Package: "cmd/c", Optional: true},
				},
				Base:       []BaseFile{{Path: "/etc/passwd"}, {Path: "/tmp", Mode: 0o1777}},
				Cmd:        []string{"/usr/bin/a", "-v"},
				WorkingDir: "/",
				User:       "0:0",
			},
		},
		{name: "no table", text: "# Final-stage layout\n# Config: Cmd [\"/x\"]\n", wantErr: "no binary rows"},
		{name: "no cmd", text: strings.Replace(header, `Cmd ["/usr/bin/a", "-v"], `, "", 1), wantErr: "no Cmd"},
		{name: "no header at all", text: "FROM scratch\n", wantErr: "no Cmd"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseContainerfile(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestRepositoryContainerfile pins what the real header must keep saying: the plugin as
// Cmd, the three required binaries, root, and the base files.
func TestRepositoryContainerfile(t *testing.T) {
	layout := readRepoLayout(t)
	paths := map[string]Binary{}
	for _, b := range layout.Binaries {
		paths[b.Path] = b
		if _, err := os.Stat(filepath.Join("../../..", b.Package)); err != nil && !b.Optional {
			t.Errorf("%s: package %s is not in the tree", b.Path, b.Package)
		}
	}
	for _, p := range []string{"/usr/bin/rdma-dra-kubeletplugin", "/usr/bin/rdma-dra", "/usr/bin/rdma-dra-cdi-hook"} {
		if b, ok := paths[p]; !ok || b.Optional || b.Mode != 0o755 {
			t.Errorf("layout row %s = %+v, want a required 0755 binary", p, b)
		}
	}
	if !reflect.DeepEqual(layout.Cmd, []string{"/usr/bin/rdma-dra-kubeletplugin"}) || layout.User != "0:0" || layout.WorkingDir != "/" || layout.Entrypoint != nil {
		t.Errorf("config = Entrypoint %q Cmd %q WorkingDir %q User %q", layout.Entrypoint, layout.Cmd, layout.WorkingDir, layout.User)
	}
	if len(layout.Base) != 4 {
		t.Errorf("base files = %+v, want 4", layout.Base)
	}
}

// TestArchiveMatchesContainerfile writes the image of the repository's layout from stand-in
// binaries and checks, member by member, that the archive holds exactly the documented
// files with their modes, and the documented config.
func TestArchiveMatchesContainerfile(t *testing.T) {
	layout := readRepoLayout(t)
	dir := t.TempDir()
	hostPaths := map[string]string{}
	for _, b := range layout.Binaries {
		p := filepath.Join(dir, filepath.Base(b.Path))
		if err := os.WriteFile(p, []byte("#!binary "+b.Path), 0o700); err != nil {
			t.Fatal(err)
		}
		hostPaths[b.Path] = p
	}
	img, err := Image(layout, "localhost/rdma-dra-driver:v1.2.3", "v1.2.3", hostPaths)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := ociimage.WriteArchive(&buf, img); err != nil {
		t.Fatal(err)
	}
	cfg, members := readImage(t, buf.Bytes())

	want := map[string]int64{}
	for _, b := range layout.Binaries {
		want[strings.TrimPrefix(b.Path, "/")] = int64(b.Mode)
	}
	for _, f := range layout.Base {
		name := strings.TrimPrefix(f.Path, "/")
		if f.Path == "/tmp" {
			name += "/"
		}
		want[name] = int64(f.Mode)
	}
	for name, mode := range want {
		got, ok := members[name]
		if !ok {
			t.Errorf("archive lacks %s", name)
			continue
		}
		if mode != 0 && got != mode {
			t.Errorf("%s mode = %#o, want %#o", name, got, mode)
		}
	}
	for name := range members {
		if _, ok := want[name]; !ok && !strings.HasSuffix(name, "/") {
			t.Errorf("archive has %s, which the Containerfile does not list", name)
		}
	}
	if !reflect.DeepEqual(cfg.Config.Cmd, layout.Cmd) || cfg.Config.User != layout.User || cfg.Config.WorkingDir != layout.WorkingDir || cfg.Config.Entrypoint != nil {
		t.Errorf("image config = %+v", cfg.Config)
	}
	if cfg.Config.Labels["org.opencontainers.image.version"] != "v1.2.3" {
		t.Errorf("version label = %q", cfg.Config.Labels["org.opencontainers.image.version"])
	}
}

func TestOptions(t *testing.T) {
	o := Options{Version: "v0.1.0-3-gabc", OutDir: "/out"}
	if o.Ref() != "localhost/rdma-dra-driver:v0.1.0-3-gabc" {
		t.Errorf("Ref = %s", o.Ref())
	}
	if o.ArchivePath() != "/out/rdma-dra-driver-v0.1.0-3-gabc.oci.tar" {
		t.Errorf("ArchivePath = %s", o.ArchivePath())
	}
	for _, bad := range []string{"", "a b", "-x", "v1/2"} {
		if validTag.MatchString(bad) {
			t.Errorf("tag %q accepted", bad)
		}
	}
}

func readRepoLayout(t *testing.T) Layout {
	t.Helper()
	text, err := os.ReadFile(repoContainerfile)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := ParseContainerfile(string(text))
	if err != nil {
		t.Fatal(err)
	}
	return layout
}

// readImage returns the config and the layer's members (name -> mode) of an archive.
func readImage(t *testing.T, archive []byte) (*v1.ConfigFile, map[string]int64) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "img.tar")
	if err := os.WriteFile(path, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	idx, err := ociimage.ReadArchive(path, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 {
		t.Fatalf("index.json: %v %+v", err, im)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	zr, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	members := map[string]int64{}
	lr := tar.NewReader(zr)
	for {
		h, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d", h.Name, h.Uid, h.Gid)
		}
		members[h.Name] = h.Mode
	}
	return cfg, members
}

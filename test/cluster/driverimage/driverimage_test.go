package driverimage

import (
	"flag"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// repoRoot is the repository root, seen from this package.
const repoRoot = "../../.."

var update = flag.Bool("update", false, "rewrite the Containerfile's generated final stage from Files, Config and Labels")

// TestContainerfile checks that the repository's Containerfile ends in the stage written
// from the declaration; -update rewrites it.
func TestContainerfile(t *testing.T) {
	name := filepath.Join(repoRoot, "Containerfile")
	text, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	want, err := RewriteContainerfile(string(text))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(name, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(want, string(text)); diff != "" {
		t.Errorf("the Containerfile's generated stage is stale (-want +got); run: cd test && go test ./cluster/driverimage -run TestContainerfile -update\n%s", diff)
	}
}

func TestStage(t *testing.T) {
	cfg := RuntimeConfig{Cmd: []string{"/usr/bin/a", "-v"}, User: "0:0", WorkingDir: "/"}
	labels := func() string {
		var b strings.Builder
		b.WriteString("LABEL ")
		for i, k := range sortedKeys(Labels("", "")) {
			if i > 0 {
				b.WriteString(" \\\n      ")
			}
			v := Labels("${VERSION}", "${GIT_COMMIT}")[k]
			b.WriteString(k + `="` + v + `"`)
		}
		return b.String() + "\n"
	}()
	const args = "ARG TARGETARCH\nARG VERSION=v0.0.0-dev\nARG GIT_COMMIT=unknown\n"
	tests := []struct {
		name  string
		files []File
		cfg   RuntimeConfig
		want  string
	}{
		{
			name: "one directory, one COPY",
			files: []File{
				{Path: "/usr/bin/a", Mode: 0o755, Package: "cmd/a"},
				{Path: "/usr/bin/b", Mode: 0o755, Package: "cmd/b"},
			},
			cfg: cfg,
			want: args + "COPY --chown=0:0 --chmod=0755 \\\n     linux_${TARGETARCH}/a \\\n     linux_${TARGETARCH}/b \\\n     /usr/bin/\n" + labels +
				"USER 0:0\nWORKDIR /\nCMD [\"/usr/bin/a\", \"-v\"]\n",
		},
		{
			name: "mode, owner, directory and name split",
			files: []File{
				{Path: "/usr/bin/a", Mode: 0o755, Package: "cmd/a"},
				{Path: "/usr/bin/b", Mode: 0o750, Package: "cmd/b"},
				{Path: "/usr/bin/c", Mode: 0o750, UID: 65532, GID: 65532, Package: "cmd/c"},
				{Path: "/usr/local/bin/d", Mode: 0o750, UID: 65532, GID: 65532, Package: "cmd/d"},
				{Path: "/usr/local/bin/renamed", Mode: 0o750, UID: 65532, GID: 65532, Package: "cmd/e"},
			},
			cfg: RuntimeConfig{Entrypoint: []string{"/usr/bin/a"}, Cmd: []string{"serve"}, User: "65532", WorkingDir: "/home"},
			want: args +
				"COPY --chown=0:0 --chmod=0755 linux_${TARGETARCH}/a /usr/bin/\n" +
				"COPY --chown=0:0 --chmod=0750 linux_${TARGETARCH}/b /usr/bin/\n" +
				"COPY --chown=65532:65532 --chmod=0750 linux_${TARGETARCH}/c /usr/bin/\n" +
				"COPY --chown=65532:65532 --chmod=0750 linux_${TARGETARCH}/d /usr/local/bin/\n" +
				"COPY --chown=65532:65532 --chmod=0750 linux_${TARGETARCH}/e /usr/local/bin/renamed\n" +
				labels + "ENTRYPOINT [\"/usr/bin/a\"]\nUSER 65532\nWORKDIR /home\nCMD [\"serve\"]\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, stage(tc.files, tc.cfg)); diff != "" {
				t.Errorf("stage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRewriteContainerfile(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    string
		wantErr string
	}{
		{
			name: "replaces the block, keeps the rest",
			text: "# head\nFROM x\n" + generatedBegin + "\nold\n" + generatedEnd + "\n# tail\n",
			want: "# head\nFROM x\n" + generatedBegin + "\n" + generatedHint + "\n" + ContainerfileStage() + generatedEnd + "\n# tail\n",
		},
		{name: "no markers", text: "FROM x\nCMD [\"/a\"]\n", wantErr: "generated block"},
		{name: "end before begin", text: generatedEnd + "\n" + generatedBegin + "\n", wantErr: "generated block"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := RewriteContainerfile(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestDeclaration pins what the declaration must keep saying: the plugin as Cmd, root, the
// four binaries from packages of the tree, each once.
func TestDeclaration(t *testing.T) {
	paths, names := map[string]bool{}, map[string]bool{}
	for _, f := range Files {
		if paths[f.Path] || names[f.Name()] {
			t.Errorf("%s (%s) declared twice", f.Path, f.Name())
		}
		paths[f.Path], names[f.Name()] = true, true
		if _, err := os.Stat(filepath.Join(repoRoot, f.Package, "main.go")); err != nil {
			t.Errorf("%s: package %s is not a main package of the tree: %v", f.Path, f.Package, err)
		}
		if f.Mode != 0o755 || f.UID != 0 || f.GID != 0 {
			t.Errorf("%s: mode %#o owner %d:%d, want 0755 root", f.Path, f.Mode, f.UID, f.GID)
		}
	}
	for _, p := range []string{"/usr/bin/rdma-dra-kubeletplugin", "/usr/bin/rdma-dra", "/usr/bin/rdma-dra-cdi-hook", "/usr/bin/rdma-dra-controller"} {
		if !paths[p] {
			t.Errorf("Files lacks %s", p)
		}
	}
	if !reflect.DeepEqual(Config.Cmd, []string{"/usr/bin/rdma-dra-kubeletplugin"}) || Config.User != "0:0" || Config.WorkingDir != "/" || Config.Entrypoint != nil {
		t.Errorf("Config = %+v", Config)
	}
}

// TestImageMatchesDeclaration builds the engine-free image from stand-in binaries, writes
// and reads back its archive, and checks its final filesystem, entry by entry, and config
// against the declaration.
func TestImageMatchesDeclaration(t *testing.T) {
	dir := t.TempDir()
	binDir := filepath.Join(dir, "bin")
	writeStandIns(t, binDir, "amd64")
	img, err := Image("amd64", "v1.2.3", "abc1234", binDir)
	if err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(dir, "img.tar")
	if err := ociimage.WriteFile(archive, "localhost/rdma-dra-driver:v1.2.3", img); err != nil {
		t.Fatal(err)
	}
	idx, err := ociimage.ReadArchive(archive, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := ociimage.Images(idx)
	if err != nil || len(images) != 1 || images["linux/amd64"] == nil {
		t.Fatalf("archive holds %v (%v), want one linux/amd64 image", images, err)
	}
	got := flatten(t, images["linux/amd64"])

	want := map[string]fsEntry{"usr/": {Type: typeDir, Mode: "0755"}, "usr/bin/": {Type: typeDir, Mode: "0755"}}
	for _, f := range Files {
		want[strings.TrimPrefix(f.Path, "/")] = fsEntry{Type: typeReg, Mode: octal(f.Mode), UID: f.UID, GID: f.GID, Digest: digestOf(standIn(f, "amd64"))}
	}
	for _, f := range BaseFiles {
		name := strings.TrimPrefix(f.Path, "/")
		e := fsEntry{Type: typeReg, Mode: octal(f.Mode)}
		if f.Dir {
			name, e.Type = name+"/", typeDir
		}
		for d := path.Dir(strings.TrimSuffix(name, "/")); d != "."; d = path.Dir(d) {
			want[d+"/"] = fsEntry{Type: typeDir, Mode: "0755"}
		}
		want[name] = e
	}
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("image lacks %s", name)
			continue
		}
		if w.Digest == "" {
			g.Digest = "" // the base's files: their content is the stand-in's
		}
		if g != w {
			t.Errorf("%s = %+v, want %+v", name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("image has %s, which the declaration does not list", name)
		}
	}

	cf, err := images["linux/amd64"].ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if !reflect.DeepEqual(c.Cmd, Config.Cmd) || c.Entrypoint != nil || c.User != Config.User || c.WorkingDir != Config.WorkingDir {
		t.Errorf("config = Entrypoint %q Cmd %q User %q WorkingDir %q, want %+v", c.Entrypoint, c.Cmd, c.User, c.WorkingDir, Config)
	}
	if !reflect.DeepEqual(c.Labels, Labels("v1.2.3", "abc1234")) {
		t.Errorf("labels = %v", c.Labels)
	}
	if !reflect.DeepEqual(c.Env, baseEnv) {
		t.Errorf("env = %q, want the base's %q", c.Env, baseEnv)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || len(cf.RootFS.DiffIDs) != 2 {
		t.Errorf("platform %s/%s, %d layers; want linux/amd64 and two layers (base, binaries)", cf.OS, cf.Architecture, len(cf.RootFS.DiffIDs))
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

// standIn is the content of the stand-in binary of f for arch.
func standIn(f File, arch string) string { return "stand-in " + f.Name() + " for linux/" + arch + "\n" }

// writeStandIns writes a stand-in for each of Files into dir, as make stages the real
// binaries, with a mode that the image must not keep (the declaration sets the mode).
func writeStandIns(t *testing.T, dir, arch string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range Files {
		if err := os.WriteFile(filepath.Join(dir, f.Name()), []byte(standIn(f, arch)), fs.FileMode(0o700)); err != nil {
			t.Fatal(err)
		}
	}
}

package driverimage

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// engineLabels are labels an engine adds by itself, left out of the comparison.
var engineLabels = []string{"io.buildah.version"}

// TestContainerfileBuild builds the repository's Containerfile the way `make image` does
// (hack/image.sh, ENGINE=buildah, both platforms into a manifest list), FROM the stand-in
// base and on stand-in binaries, exports the list to an OCI archive, and compares each
// platform's final filesystem (paths, types, modes, owners, contents) and config with the
// engine-free image of the same inputs. It needs buildah (Debian's package; no RUN steps,
// so chroot isolation and no runtime) and root; IMAGE_TEST_REQUIRE_ENGINE=1 (CI, make
// image-test) turns the skip into a failure.
func TestContainerfileBuild(t *testing.T) {
	buildah := requireBuildah(t)
	repo, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	archs := []string{"amd64", "arm64"}

	// The build context as make image-binaries lays it out, with stand-ins.
	context := filepath.Join(dir, "context")
	for _, arch := range archs {
		writeStandIns(t, filepath.Join(context, StageDir(arch)), arch)
	}
	engineImages := buildWithBuildah(t, buildah, repo, dir, context, writeStandInBase(t, dir, archs))
	if len(engineImages) != len(archs) {
		t.Errorf("buildah's list holds %d images, want %d: %v", len(engineImages), len(archs), keys(engineImages))
	}
	for _, arch := range archs {
		t.Run(arch, func(t *testing.T) {
			engine := engineImages["linux/"+arch]
			if engine == nil {
				engine = engineImages["linux/"+arch+"/v8"] // arm64's variant, when the engine names it
			}
			if engine == nil {
				t.Fatalf("no linux/%s image in buildah's list: %v", arch, keys(engineImages))
			}
			free, err := Image(arch, "v1.2.3", "abc1234", filepath.Join(context, StageDir(arch)))
			if err != nil {
				t.Fatal(err)
			}
			compareWithEngineFree(t, arch, free, engine)
		})
	}
}

// requireBuildah returns buildah's path, or skips the test where buildah cannot build
// (fails it under IMAGE_TEST_REQUIRE_ENGINE=1).
func requireBuildah(t *testing.T) string {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("IMAGE_TEST_REQUIRE_ENGINE") == "1" {
			t.Fatalf("IMAGE_TEST_REQUIRE_ENGINE=1 but %s", why)
		}
		t.Skip(why + ": the Containerfile is not built (apt-get install --no-install-recommends buildah; make image-test)")
	}
	buildah, err := exec.LookPath("buildah")
	if err != nil {
		skip("buildah is not installed")
	}
	if os.Geteuid() != 0 {
		skip("buildah's chroot isolation needs root here")
	}
	return buildah
}

// writeStandInBase writes the stand-in base, both platforms in one index as the pinned
// base is, to an OCI archive in dir and returns its path.
func writeStandInBase(t *testing.T, dir string, archs []string) string {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, arch := range archs {
		base, err := BaseImage(arch)
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: base, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	baseArchive := filepath.Join(dir, "base.tar")
	if err := ociimage.WriteFile(baseArchive, "localhost/stand-in-base:test", mutate.AppendManifests(empty.Index, adds...)); err != nil {
		t.Fatal(err)
	}
	return baseArchive
}

// buildWithBuildah builds the Containerfile as make image does (hack/image.sh build, both
// platforms) on context and baseArchive, in buildah storage of its own under dir so that
// no images stay behind, exports the list and returns its images by platform.
func buildWithBuildah(t *testing.T, buildah, repo, dir, context, baseArchive string) map[string]v1.Image {
	t.Helper()
	storage := filepath.Join(dir, "storage.conf")
	conf := "[storage]\ndriver = \"vfs\"\ngraphroot = \"" + filepath.Join(dir, "root") + "\"\nrunroot = \"" + filepath.Join(dir, "run") + "\"\n"
	if err := os.WriteFile(storage, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	const ref = "localhost/rdma-dra-driver:enginetest"
	env := append(os.Environ(), "CONTAINERS_STORAGE_CONF="+storage, "BUILDAH_ISOLATION=chroot",
		"ENGINE=buildah", "IMAGE="+ref, "PLATFORMS=linux/amd64,linux/arm64", "BASE_IMAGE=oci-archive:"+baseArchive,
		"CONTEXT="+context, "CONTAINERFILE="+filepath.Join(repo, "Containerfile"), "VERSION=v1.2.3", "GIT_COMMIT=abc1234")
	run := func(name string, args ...string) {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Env, cmd.Dir = env, repo
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
	}
	start := time.Now()
	run(filepath.Join(repo, "hack", "image.sh"), "build")
	built := time.Since(start)
	exported := filepath.Join(dir, "engine.tar")
	run(buildah, "manifest", "push", "--all", ref, "oci-archive:"+exported)
	t.Logf("buildah: %s to build both platforms, %s with the export", built.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))

	idx, err := ociimage.ReadArchive(exported, filepath.Join(dir, "layout"))
	if err != nil {
		t.Fatal(err)
	}
	images, err := ociimage.Images(idx)
	if err != nil {
		t.Fatal(err)
	}
	return images
}

// compareWithEngineFree compares the final filesystem and the config of buildah's image
// of arch with the engine-free one, and each declared file with its stand-in.
func compareWithEngineFree(t *testing.T, arch string, free, engine v1.Image) {
	t.Helper()
	if diff := cmp.Diff(flatten(t, free), flatten(t, engine)); diff != "" {
		t.Errorf("final filesystems differ (-engine-free +buildah):\n%s", diff)
	}
	for _, f := range Files {
		if e := flatten(t, engine)[strings.TrimPrefix(f.Path, "/")]; e.Mode != octal(f.Mode) || e.Digest != digestOf(standIn(f, arch)) {
			t.Errorf("buildah's %s = %+v, want mode %#o and the %s stand-in", f.Path, e, f.Mode, arch)
		}
	}
	want, got := configOf(t, free), configOf(t, engine)
	for _, l := range engineLabels {
		delete(got.Labels, l)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("configs differ (-engine-free +buildah):\n%s", cmp.Diff(want, got))
	}
}

// imageConfig is what the comparison looks at of an image config.
type imageConfig struct {
	OS, Architecture string
	Entrypoint, Cmd  []string
	Env              []string
	User, WorkingDir string
	Labels           map[string]string
}

func configOf(t *testing.T, img v1.Image) imageConfig {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	return imageConfig{OS: cf.OS, Architecture: cf.Architecture, Entrypoint: c.Entrypoint, Cmd: c.Cmd, Env: c.Env,
		User: c.User, WorkingDir: c.WorkingDir, Labels: c.Labels}
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

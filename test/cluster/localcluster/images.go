package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// busybox is Debian's busybox-static binary that the toolbox image is made of.
const busybox = "/bin/busybox"

// toolboxImage is a shell image: busybox and a link for each of its applets.
func toolboxImage(ctx context.Context) (ociimage.Image, error) {
	out, err := exec.CommandContext(ctx, busybox, "--list").Output()
	if err != nil {
		return ociimage.Image{}, fmt.Errorf("list busybox applets (is busybox-static installed?): %w", err)
	}
	files := []ociimage.File{
		{Path: "/bin/busybox", HostPath: busybox, Mode: 0o755},
		{Path: "/tmp", Dir: true, Mode: 0o1777},
		{Path: "/etc/passwd", Content: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Path: "/etc/group", Content: []byte("root:x:0:\nnogroup:x:65534:\n")},
		{Path: "/root", Dir: true, Mode: 0o700},
	}
	for _, a := range strings.Fields(string(out)) {
		if a == "busybox" || strings.ContainsRune(a, '/') {
			continue
		}
		files = append(files, ociimage.File{Path: "/bin/" + a, Symlink: "busybox"})
	}
	return ociimage.Image{
		Name:   ToolboxImage,
		Files:  files,
		Cmd:    []string{"/bin/sh"},
		Env:    []string{"PATH=/bin"},
		Labels: map[string]string{"org.opencontainers.image.title": "rdma-dra-driver local cluster toolbox"},
	}, nil
}

// pauseImage wraps our pause binary.
func pauseImage(bins *bincache.Cache) ociimage.Image {
	return ociimage.Image{
		Name:       PauseImage,
		Files:      []ociimage.File{{Path: "/pause", HostPath: bins.Helpers.Path("pause"), Mode: 0o755}},
		Entrypoint: []string{"/pause"},
		User:       "65535:65535",
		Labels:     map[string]string{"org.opencontainers.image.title": "rdma-dra-driver local cluster pause"},
	}
}

// importImages writes the pause and toolbox archives and imports them into containerd's
// k8s.io namespace, where the CRI plugin sees them.
func importImages(ctx context.Context, l Layout, bins *bincache.Cache) error {
	if err := os.MkdirAll(l.Images(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.Images(), err)
	}
	tb, err := toolboxImage(ctx)
	if err != nil {
		return err
	}
	for _, img := range []ociimage.Image{pauseImage(bins), tb} {
		path := l.imageArchive(img.Name)
		if err := ociimage.WriteArchiveFile(path, img); err != nil {
			return fmt.Errorf("write image %s: %w", img.Name, err)
		}
		if err := ImportArchive(ctx, l, bins, path); err != nil {
			return err
		}
	}
	return nil
}

// mockGPUImage wraps the static mock GPU driver at bin (test/cluster/cmd/mockgpu).
func mockGPUImage(bin string) ociimage.Image {
	return ociimage.Image{
		Name:       MockGPUImage,
		Files:      []ociimage.File{{Path: "/mockgpu", HostPath: bin, Mode: 0o755}},
		Entrypoint: []string{"/mockgpu"},
		Labels:     map[string]string{"org.opencontainers.image.title": "rdma-dra-driver local cluster mock GPU driver"},
	}
}

// imageArchive is where the archive of the image ref is written: in Images(), named
// after ref without localhost/ and with _ for : (localhost/pause:latest: pause_latest.oci.tar).
func (l Layout) imageArchive(ref string) string {
	name := strings.ReplaceAll(strings.TrimPrefix(ref, "localhost/"), ":", "_")
	return filepath.Join(l.Images(), name+".oci.tar")
}

// ImportArchive imports an OCI archive into the cluster's containerd (namespace k8s.io).
func ImportArchive(ctx context.Context, l Layout, bins *bincache.Cache, path string) error {
	if _, err := ctr(ctx, l, bins, "-n", "k8s.io", "images", "import", path); err != nil {
		return fmt.Errorf("import %s: %w", path, err)
	}
	return nil
}

// ctr runs our ctr against our containerd.
func ctr(ctx context.Context, l Layout, bins *bincache.Cache, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, bins.Containerd.Path("ctr"), append([]string{"--address", l.ContainerdSocket()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

package driverimage

import (
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// baseEnv, baseUser and baseWorkingDir are the config of distroless static's root image,
// which the stand-in base repeats so that the two builds inherit the same.
var (
	baseEnv        = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	baseUser       = "0"
	baseWorkingDir = "/"
)

// hostCABundle is copied in for /etc/ssl/certs/ca-certificates.crt when present.
var hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// BaseImage returns the stand-in for the Containerfile's base image (distroless static) of
// one architecture: the files of BaseFiles and the base's config, in one layer. The
// engine-free build puts the driver's layer on it, and the engine test builds the
// Containerfile FROM it, because no registry is reachable from where they run.
func BaseImage(arch string) (v1.Image, error) {
	files := make([]ociimage.File, 0, len(BaseFiles))
	for _, bf := range BaseFiles {
		f, err := baseFile(bf)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	img, err := ociimage.Build(ociimage.Image{
		Name:         "stand-in base",
		Files:        files,
		Env:          baseEnv,
		User:         baseUser,
		WorkingDir:   baseWorkingDir,
		Architecture: arch,
	})
	if err != nil {
		return nil, fmt.Errorf("build the stand-in base image: %w", err)
	}
	return img, nil
}

// baseFile returns the stand-in's content of a file of distroless static.
func baseFile(f BaseFile) (ociimage.File, error) {
	out := ociimage.File{Path: f.Path, Mode: f.Mode, Dir: f.Dir}
	if f.Dir {
		return out, nil
	}
	switch f.Path {
	case "/etc/passwd":
		out.Content = []byte("root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
	case "/etc/group":
		out.Content = []byte("root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n")
	case "/etc/ssl/certs/ca-certificates.crt":
		out.Content = []byte{}
		if _, err := os.Stat(hostCABundle); err == nil {
			out.Content, out.HostPath = nil, hostCABundle
		}
	default:
		return ociimage.File{}, fmt.Errorf("base file %s: no stand-in known; teach driverimage.baseFile", f.Path)
	}
	return out, nil
}

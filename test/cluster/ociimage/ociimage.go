// Package ociimage builds small container images from lists of host files and writes them
// as OCI image-layout archives that `ctr images import` accepts. The local cluster uses it
// for its toolbox and pause images, and the driver image is assembled the same way, so no
// registry and no image builder are needed.
//
// Images, manifests, configs and the layout are go-containerregistry's (v1, mutate, layout);
// this package adds only what that library leaves to its callers: a layer made from a file
// list, and a tar of the layout directory with the names containerd registers on import.
//
// Output is reproducible: entries are sorted, owned as listed (root by default) and stamped
// with a fixed time.
package ociimage

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// createdBy is the history entry of every layer this package writes.
const createdBy = "rdma-dra-driver test/cluster/ociimage"

// File is one entry of the image's layer.
type File struct {
	// Path inside the image, absolute ("/bin/busybox").
	Path string
	// HostPath is read for the content of a regular file. Exactly one of HostPath, Content,
	// Symlink or Dir must be set.
	HostPath string
	// Content is the literal content of a regular file.
	Content []byte
	// Symlink makes the entry a symbolic link to this target.
	Symlink string
	// Dir makes the entry a directory.
	Dir bool
	// Mode is the permission bits; 0 means 0755 for directories and executables read from
	// the host with an executable bit, else 0644.
	Mode fs.FileMode
	// UID and GID own the entry; zero is root. Parent directories the list does not name
	// are root's.
	UID, GID int
}

// Image describes the image to write: Base, or an empty image, with one more layer that
// holds Files, and the config below over the base's.
type Image struct {
	// Name is the full reference, e.g. "localhost/toolbox:latest".
	Name  string
	Files []File
	// Base is the image the layer goes on; nil means none (an image of one layer). Its
	// config is inherited where the fields below are empty, as a Containerfile's FROM does.
	Base v1.Image
	// Entrypoint, Cmd, Env, WorkingDir and User replace the base's when set.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	// Labels are added to the base's.
	Labels map[string]string
	// OS and Architecture default to the base's, else linux and this program's architecture.
	OS           string
	Architecture string
	// Created stamps the config, the history and every tar entry; zero means the Unix epoch.
	Created time.Time
}

// Build returns img as a go-containerregistry image with OCI media types.
func Build(img Image) (v1.Image, error) {
	layerTar, err := buildLayer(img)
	if err != nil {
		return nil, fmt.Errorf("build layer of %s: %w", img.Name, err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression),
		// Compress once: the digest and the writer both read the compressed layer, and gzip
		// at its best compression takes seconds for the driver's binaries.
		tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("make layer of %s: %w", img.Name, err)
	}
	base := img.Base
	if base == nil {
		base = mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	}
	created := v1.Time{Time: stamp(img.Created)}
	out, err := mutate.Append(base, mutate.Addendum{
		Layer:   layer,
		History: v1.History{Created: created, CreatedBy: createdBy},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer to %s: %w", img.Name, err)
	}
	cf, err := out.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read config of %s: %w", img.Name, err)
	}
	cf = cf.DeepCopy()
	cf.Created = created
	cf.OS = firstOf(img.OS, cf.OS, "linux")
	cf.Architecture = firstOf(img.Architecture, cf.Architecture, runtime.GOARCH)
	c := &cf.Config
	if img.Entrypoint != nil {
		c.Entrypoint = img.Entrypoint
	}
	if img.Cmd != nil {
		c.Cmd = img.Cmd
	}
	if img.Env != nil {
		c.Env = img.Env
	}
	c.WorkingDir = firstOf(img.WorkingDir, c.WorkingDir)
	c.User = firstOf(img.User, c.User)
	if len(img.Labels) > 0 && c.Labels == nil {
		c.Labels = map[string]string{}
	}
	for k, v := range img.Labels {
		c.Labels[k] = v
	}
	out, err = mutate.ConfigFile(out, cf)
	if err != nil {
		return nil, fmt.Errorf("set config of %s: %w", img.Name, err)
	}
	return out, nil
}

// firstOf returns the first non-empty string.
func firstOf(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

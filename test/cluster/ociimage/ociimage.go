// Package ociimage assembles small single-layer container images from host files and writes
// them as OCI image-layout archives that `ctr images import` accepts. The local cluster uses it
// for its toolbox and pause images, and the driver image is assembled the same way, so no
// registry and no image builder are needed.
//
// Output is reproducible: entries are sorted, owned by root and stamped with a fixed time.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"
)

// Media types and annotations of the OCI image specification and containerd.
const (
	MediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	MediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"

	// AnnotationRefName is the OCI tag annotation of a manifest in index.json.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full image name that `ctr images import` registers.
	AnnotationContainerdName = "io.containerd.image.name"
)

// File is one entry of the image's single layer.
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
}

// Image describes the image to write.
type Image struct {
	// Name is the full reference, e.g. "localhost/toolbox:latest".
	Name  string
	Files []File
	// Entrypoint and Cmd as in the OCI image config.
	Entrypoint []string
	Cmd        []string
	Env        []string
	WorkingDir string
	User       string
	Labels     map[string]string
	// OS and Architecture default to linux and the architecture of this program.
	OS           string
	Architecture string
	// Created stamps the config, the history and every tar entry; zero means the Unix epoch.
	Created time.Time
}

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *Platform         `json:"platform,omitempty"`
}

// Platform of a manifest in an index.
type Platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

// Index is index.json of an image layout.
type Index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []Descriptor `json:"manifests"`
}

// Manifest is an OCI image manifest.
type Manifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        Descriptor   `json:"config"`
	Layers        []Descriptor `json:"layers"`
}

// Config is the subset of the OCI image configuration that this package writes.
type Config struct {
	Created      string        `json:"created"`
	Architecture string        `json:"architecture"`
	OS           string        `json:"os"`
	Config       RuntimeConfig `json:"config"`
	RootFS       RootFS        `json:"rootfs"`
	History      []History     `json:"history"`
}

// RuntimeConfig is the "config" member of the image configuration.
type RuntimeConfig struct {
	Entrypoint []string          `json:"Entrypoint,omitempty"`
	Cmd        []string          `json:"Cmd,omitempty"`
	Env        []string          `json:"Env,omitempty"`
	WorkingDir string            `json:"WorkingDir,omitempty"`
	User       string            `json:"User,omitempty"`
	Labels     map[string]string `json:"Labels,omitempty"`
}

// RootFS lists the uncompressed layer digests.
type RootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

// History is one history entry of the image configuration.
type History struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// WriteArchive writes img as an OCI image-layout tar archive to w.
func WriteArchive(w io.Writer, img Image) error {
	if img.Name == "" {
		return errors.New("image name is empty")
	}
	layerTar, err := buildLayer(img)
	if err != nil {
		return fmt.Errorf("build layer of %s: %w", img.Name, err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return fmt.Errorf("gzip layer: %w", err)
	}
	if _, err := zw.Write(layerTar); err != nil {
		return fmt.Errorf("gzip layer: %w", err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("gzip layer: %w", err)
	}

	created := stamp(img.Created).UTC().Format(time.RFC3339)
	osName, arch := img.OS, img.Architecture
	if osName == "" {
		osName = "linux"
	}
	if arch == "" {
		arch = runtime.GOARCH
	}
	cfg := Config{
		Created:      created,
		Architecture: arch,
		OS:           osName,
		Config: RuntimeConfig{
			Entrypoint: img.Entrypoint, Cmd: img.Cmd, Env: img.Env,
			WorkingDir: img.WorkingDir, User: img.User, Labels: img.Labels,
		},
		RootFS:  RootFS{Type: "layers", DiffIDs: []string{digest(layerTar)}},
		History: []History{{Created: created, CreatedBy: "rdma-dra-driver test/cluster/ociimage"}},
	}
	cfgJSON, err := json.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("marshal config: %w", err)
	}
	man := Manifest{
		SchemaVersion: 2,
		MediaType:     MediaTypeManifest,
		Config:        Descriptor{MediaType: MediaTypeConfig, Digest: digest(cfgJSON), Size: int64(len(cfgJSON))},
		Layers:        []Descriptor{{MediaType: MediaTypeLayerGz, Digest: digest(gz.Bytes()), Size: int64(gz.Len())}},
	}
	manJSON, err := json.Marshal(man)
	if err != nil {
		return fmt.Errorf("marshal manifest: %w", err)
	}
	idx := Index{
		SchemaVersion: 2,
		MediaType:     MediaTypeIndex,
		Manifests: []Descriptor{{
			MediaType: MediaTypeManifest, Digest: digest(manJSON), Size: int64(len(manJSON)),
			Annotations: map[string]string{
				AnnotationContainerdName: img.Name,
				AnnotationRefName:        tagOf(img.Name),
			},
			Platform: &Platform{Architecture: arch, OS: osName},
		}},
	}
	idxJSON, err := json.Marshal(idx)
	if err != nil {
		return fmt.Errorf("marshal index: %w", err)
	}

	mtime := stamp(img.Created)
	tw := tar.NewWriter(w)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", idxJSON},
		{blobPath(man.Config.Digest), cfgJSON},
		{blobPath(man.Layers[0].Digest), gz.Bytes()},
		{blobPath(idx.Manifests[0].Digest), manJSON},
	}
	for _, d := range []string{"blobs/", "blobs/sha256/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
			return fmt.Errorf("write archive: %w", err)
		}
	}
	for _, e := range entries {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: e.name, Mode: 0o644, Size: int64(len(e.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write archive entry %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("write archive entry %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	return nil
}

// WriteArchiveFile writes img to the file at path, atomically.
func WriteArchiveFile(path string, img Image) error {
	tmp, err := os.CreateTemp(dirOf(path), ".ociimage-*")
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := WriteArchive(tmp, img); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp.Name(), err)
	}
	// CreateTemp makes the file private; an image archive is not a secret.
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("rename to %s: %w", path, err)
	}
	return nil
}

// buildLayer returns the uncompressed layer tar of img's files, with parent directories
// added where the list does not name them.
func buildLayer(img Image) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range img.Files {
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

	mtime := stamp(img.Created)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, p := range paths {
		f := byPath[p]
		hdr := &tar.Header{Name: p, ModTime: mtime, Uname: "root", Gname: "root", Format: tar.FormatPAX}
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
				return nil, fmt.Errorf("file %s: %w", p, err)
			}
			if !st.Mode().IsRegular() {
				return nil, fmt.Errorf("file %s: host path %s is not a regular file", p, f.HostPath)
			}
			def := fs.FileMode(0o644)
			if st.Mode()&0o111 != 0 {
				def = 0o755
			}
			data, err = os.ReadFile(f.HostPath)
			if err != nil {
				return nil, fmt.Errorf("file %s: %w", p, err)
			}
			hdr.Typeflag, hdr.Mode = tar.TypeReg, int64(orMode(f.Mode, def))
		}
		hdr.Size = int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
		if _, err := tw.Write(data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", p, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	return buf.Bytes(), nil
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

func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(d string) string { return "blobs/" + strings.Replace(d, ":", "/", 1) }

// tagOf returns the tag of a reference, "latest" when it has none.
func tagOf(ref string) string {
	name := ref
	if i := strings.Index(name, "@"); i >= 0 {
		name = name[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		return name[i+1:]
	}
	return "latest"
}

func dirOf(p string) string {
	if i := strings.LastIndex(p, "/"); i >= 0 {
		return p[:i+1]
	}
	return "."
}

package ociimage

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// Annotations of the archive's index.json entry.
const (
	// AnnotationRefName is the OCI tag annotation, which oci-archive:FILE:TAG references
	// (buildah, podman, skopeo) look up.
	AnnotationRefName = "org.opencontainers.image.ref.name"
	// AnnotationContainerdName is the full image name that `ctr images import` registers.
	AnnotationContainerdName = "io.containerd.image.name"
)

// WriteArchive builds img and writes it as an OCI image-layout tar archive to w.
func WriteArchive(w io.Writer, img Image) error {
	if img.Name == "" {
		return errors.New("image name is empty")
	}
	built, err := Build(img)
	if err != nil {
		return err
	}
	return Write(w, img.Name, built)
}

// WriteArchiveFile writes img to the file at path, atomically.
func WriteArchiveFile(path string, img Image) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return WriteArchive(w, img) })
}

// Write writes an image, or an index of images (one per platform), as an OCI image-layout
// tar archive named ref: index.json has one entry, annotated with ref's tag and with ref.
func Write(w io.Writer, ref string, m mutate.Appendable) error {
	if ref == "" {
		return errors.New("image name is empty")
	}
	dir, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return fmt.Errorf("create layout directory: %w", err)
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write image layout: %w", err)
	}
	opts := []layout.Option{layout.WithAnnotations(map[string]string{
		AnnotationContainerdName: ref,
		AnnotationRefName:        tagOf(ref),
	})}
	switch x := m.(type) {
	case v1.Image:
		cf, err := x.ConfigFile()
		if err != nil {
			return fmt.Errorf("read config of %s: %w", ref, err)
		}
		if pl := cf.Platform(); pl != nil {
			opts = append(opts, layout.WithPlatform(*pl))
		}
		err = p.AppendImage(x, opts...)
		if err != nil {
			return fmt.Errorf("write %s into the layout: %w", ref, err)
		}
	case v1.ImageIndex:
		if err := p.AppendIndex(x, opts...); err != nil {
			return fmt.Errorf("write %s into the layout: %w", ref, err)
		}
	default:
		return fmt.Errorf("write %s: %T is neither an image nor an index", ref, m)
	}
	return tarDir(w, dir)
}

// WriteFile writes an image or an index to the file at path, atomically (see Write).
func WriteFile(path, ref string, m mutate.Appendable) error {
	return atomicfile.Write(path, 0o644, func(w io.Writer) error { return Write(w, ref, m) })
}

// tarDir writes the files under dir as a tar stream, in lexical order, owned by root, with
// fixed modes and times, so that the same layout gives the same bytes.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	epoch := time.Unix(0, 0).UTC()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: epoch, Format: tar.FormatPAX, Uname: "root", Gname: "root"}
		if d.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
			return tw.WriteHeader(hdr)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, st.Size()
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive image layout: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close archive: %w", err)
	}
	return nil
}

// ReadArchive unpacks an OCI image-layout tar archive (ours, or one that buildah, podman or
// skopeo wrote to oci-archive:) into dir, which must outlive the index it returns.
func ReadArchive(archive, dir string) (v1.ImageIndex, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, fmt.Errorf("open archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", archive, err)
		}
		name := path.Clean(h.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, fmt.Errorf("read archive %s: member %q leaves the layout", archive, h.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			err = extractFile(dst, tr)
		default:
			err = fmt.Errorf("member %s: type %c is not part of an image layout", h.Name, h.Typeflag)
		}
		if err != nil {
			return nil, fmt.Errorf("read archive %s: %w", archive, err)
		}
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("read image layout of %s: %w", archive, err)
	}
	return idx, nil
}

func extractFile(dst string, r io.Reader) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Images returns the images an index holds, through nested indexes, by platform
// ("linux/amd64", with "/<variant>" when the image config names one).
func Images(idx v1.ImageIndex) (map[string]v1.Image, error) {
	out := map[string]v1.Image{}
	if err := collectImages(idx, out); err != nil {
		return nil, err
	}
	return out, nil
}

func collectImages(idx v1.ImageIndex, out map[string]v1.Image) error {
	im, err := idx.IndexManifest()
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	for _, d := range im.Manifests {
		switch {
		case d.MediaType.IsIndex():
			child, err := idx.ImageIndex(d.Digest)
			if err != nil {
				return fmt.Errorf("open index %s: %w", d.Digest, err)
			}
			if err := collectImages(child, out); err != nil {
				return err
			}
		case d.MediaType.IsImage():
			img, err := idx.Image(d.Digest)
			if err != nil {
				return fmt.Errorf("open image %s: %w", d.Digest, err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				return fmt.Errorf("read config of %s: %w", d.Digest, err)
			}
			key := cf.OS + "/" + cf.Architecture
			if cf.Variant != "" {
				key += "/" + cf.Variant
			}
			if _, dup := out[key]; dup {
				return fmt.Errorf("two images for platform %s", key)
			}
			out[key] = img
		}
	}
	return nil
}

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

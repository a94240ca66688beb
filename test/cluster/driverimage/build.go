package driverimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// DefaultRepository is the image name the local cluster and the e2e suite use.
const DefaultRepository = "localhost/rdma-dra-driver"

// Options says what to build.
type Options struct {
	// Repo is the repository root (it holds the Containerfile and cmd/).
	Repo string
	// Go is the go command.
	Go string
	// Version is the image tag and the version stamped into the binaries.
	Version string
	// LDFlags are the linker flags, the same as the Makefile's (version stamping).
	LDFlags string
	// Tags are the build tags of the binaries, comma-separated (go build -tags): none for
	// a release image; the local cluster's has failpoint, the e2e suite's test hooks.
	Tags string
	// Repository is the image name without tag; DefaultRepository when empty.
	Repository string
	// OutDir receives the binaries (OutDir/bin-<version>/) and the archive.
	OutDir string
	// SourceRef, when set, builds the files of this git revision (e.g. HEAD) instead of
	// the working tree: a snapshot with `git archive` in OutDir/src-<version>/, so that
	// uncommitted edits elsewhere in the tree do not leak into the image.
	SourceRef string
}

// Ref is the image reference of o.
func (o Options) Ref() string {
	repo := o.Repository
	if repo == "" {
		repo = DefaultRepository
	}
	return repo + ":" + o.Version
}

// ArchivePath is where Build writes the archive: OutDir/<name>-<version>.oci.tar.
func (o Options) ArchivePath() string {
	repo := o.Repository
	if repo == "" {
		repo = DefaultRepository
	}
	return filepath.Join(o.OutDir, path.Base(repo)+"-"+o.Version+".oci.tar")
}

// validTag is the OCI distribution spec's tag grammar.
var validTag = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// Build compiles the binaries of the layout (CGO off, static) and writes the image archive.
// It returns the archive's path.
func Build(ctx context.Context, o Options) (string, error) {
	if !validTag.MatchString(o.Version) {
		return "", fmt.Errorf("version %q is not a valid image tag", o.Version)
	}
	src := o.Repo
	if o.SourceRef != "" {
		var err error
		if src, err = snapshot(ctx, o); err != nil {
			return "", err
		}
	}
	text, err := os.ReadFile(filepath.Join(src, "Containerfile"))
	if err != nil {
		return "", fmt.Errorf("read Containerfile: %w", err)
	}
	layout, err := ParseContainerfile(string(text))
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(o.OutDir, "bin-"+o.Version)
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", binDir, err)
	}
	var pkgs []string
	hostPaths := map[string]string{}
	for _, b := range layout.Binaries {
		if _, err := os.Stat(filepath.Join(src, b.Package)); err != nil {
			if b.Optional {
				continue
			}
			return "", fmt.Errorf("binary %s: package %s missing: %w", b.Path, b.Package, err)
		}
		pkgs = append(pkgs, "./"+b.Package)
		hostPaths[b.Path] = filepath.Join(binDir, path.Base(b.Package))
	}
	// One go build for all main packages shares the compilation of common packages.
	cmd := exec.CommandContext(ctx, o.Go, goBuildArgs(o, binDir, pkgs)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	img, err := Image(layout, o.Ref(), o.Version, hostPaths)
	if err != nil {
		return "", err
	}
	if err := ociimage.WriteArchiveFile(o.ArchivePath(), img); err != nil {
		return "", fmt.Errorf("write %s: %w", o.ArchivePath(), err)
	}
	if o.SourceRef != "" {
		_ = os.RemoveAll(src)
	}
	return o.ArchivePath(), nil
}

// goBuildArgs are the arguments of the one go build of the packages pkgs into binDir.
func goBuildArgs(o Options, binDir string, pkgs []string) []string {
	return append([]string{"build", "-trimpath", "-tags", o.Tags, "-ldflags", o.LDFlags, "-o", binDir + "/"}, pkgs...)
}

// snapshot extracts the files of o.SourceRef into OutDir/src-<version> and returns it.
func snapshot(ctx context.Context, o Options) (string, error) {
	dir := filepath.Join(o.OutDir, "src-"+o.Version)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("clear %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	cmd := exec.CommandContext(ctx, "sh", "-c", `set -eu; git -C "$1" archive --format=tar "$2" | tar -x -C "$3"`, "snapshot", o.Repo, o.SourceRef, dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("snapshot %s of %s: %w: %s", o.SourceRef, o.Repo, err, out)
	}
	return dir, nil
}

// Image returns the image of layout: each binary from hostPaths (image path -> host
// file; a binary without an entry must be optional), the base image's files generated
// here, and the config of the Containerfile.
func Image(layout Layout, ref, version string, hostPaths map[string]string) (ociimage.Image, error) {
	var files []ociimage.File
	for _, b := range layout.Binaries {
		hp, ok := hostPaths[b.Path]
		if !ok {
			if b.Optional {
				continue
			}
			return ociimage.Image{}, fmt.Errorf("no host file for %s", b.Path)
		}
		if b.Owner != "0:0" {
			// ociimage writes every entry owned by root, as the Containerfile does today.
			return ociimage.Image{}, fmt.Errorf("%s: owner %s is not supported, only 0:0", b.Path, b.Owner)
		}
		files = append(files, ociimage.File{Path: b.Path, HostPath: hp, Mode: b.Mode})
	}
	for _, f := range layout.Base {
		bf, err := baseFile(f)
		if err != nil {
			return ociimage.Image{}, err
		}
		files = append(files, bf)
	}
	return ociimage.Image{
		Name:       ref,
		Files:      files,
		Entrypoint: layout.Entrypoint,
		Cmd:        layout.Cmd,
		WorkingDir: layout.WorkingDir,
		User:       layout.User,
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		Labels: map[string]string{
			"org.opencontainers.image.title":   "rdma-dra-driver",
			"org.opencontainers.image.source":  "https://github.com/rdma-dra/rdma-dra-driver",
			"org.opencontainers.image.version": version,
		},
	}, nil
}

// hostCABundle is copied in for /etc/ssl/certs/ca-certificates.crt when present.
var hostCABundle = "/etc/ssl/certs/ca-certificates.crt"

// baseFile stands in for a file of the distroless static base.
func baseFile(f BaseFile) (ociimage.File, error) {
	switch f.Path {
	case "/tmp":
		return ociimage.File{Path: f.Path, Dir: true, Mode: orMode(f.Mode, 0o1777)}, nil
	case "/etc/passwd":
		return ociimage.File{Path: f.Path, Mode: 0o644, Content: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")}, nil
	case "/etc/group":
		return ociimage.File{Path: f.Path, Mode: 0o644, Content: []byte("root:x:0:\nnogroup:x:65534:\nnonroot:x:65532:\n")}, nil
	case "/etc/ssl/certs/ca-certificates.crt":
		if _, err := os.Stat(hostCABundle); err == nil {
			return ociimage.File{Path: f.Path, HostPath: hostCABundle, Mode: 0o644}, nil
		}
		return ociimage.File{Path: f.Path, Content: []byte{}, Mode: 0o644}, nil
	default:
		return ociimage.File{}, fmt.Errorf("base file %s: no stand-in known; teach driverimage.baseFile", f.Path)
	}
}

func orMode(m, def os.FileMode) os.FileMode {
	if m == 0 {
		return def
	}
	return m
}

package driverimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// DefaultRepository is the image name the local cluster and the e2e suite use.
const DefaultRepository = "localhost/rdma-dra-driver"

// Options says what to build.
type Options struct {
	// Repo is the repository root (it holds cmd/).
	Repo string
	// Go is the go command.
	Go string
	// Version is the image tag and the version stamped into the binaries and the labels.
	Version string
	// Revision is the git commit of the revision label; "unknown" when empty, as in the
	// Containerfile.
	Revision string
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

// Build compiles the binaries of Files for this machine's architecture (CGO off, static)
// and writes the image archive: the stand-in base with the binaries, config and labels of
// the declaration on top. The declaration is this package's, also when SourceRef builds
// another revision's tree. It returns the archive's path.
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
		defer os.RemoveAll(src)
	}
	arch := runtime.GOARCH
	binDir := filepath.Join(o.OutDir, "bin-"+o.Version)
	if err := compile(ctx, o, src, arch, binDir); err != nil {
		return "", err
	}
	img, err := Image(arch, o.Version, o.Revision, binDir)
	if err != nil {
		return "", err
	}
	if err := ociimage.WriteFile(o.ArchivePath(), o.Ref(), img); err != nil {
		return "", fmt.Errorf("write %s: %w", o.ArchivePath(), err)
	}
	return o.ArchivePath(), nil
}

// compile builds the main packages of Files in src for linux/arch into binDir, each named
// File.Name, in one go build so that their common packages compile once.
func compile(ctx context.Context, o Options, src, arch, binDir string) error {
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", binDir, err)
	}
	var pkgs []string
	for _, f := range Files {
		if _, err := os.Stat(filepath.Join(src, f.Package)); err != nil {
			return fmt.Errorf("binary %s: package %s missing: %w", f.Path, f.Package, err)
		}
		pkgs = append(pkgs, "./"+f.Package)
	}
	cmd := exec.CommandContext(ctx, o.Go, goBuildArgs(o, binDir, pkgs)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build %s: %w\n%s", strings.Join(pkgs, " "), err, out)
	}
	return nil
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

// Image returns the driver image of one architecture: BaseImage with each of Files read
// from binDir/<File.Name>, Config, and Labels of version and revision.
func Image(arch, version, revision, binDir string) (v1.Image, error) {
	base, err := BaseImage(arch)
	if err != nil {
		return nil, err
	}
	if revision == "" {
		revision = "unknown"
	}
	files := make([]ociimage.File, 0, len(Files))
	for _, f := range Files {
		files = append(files, ociimage.File{Path: f.Path, HostPath: filepath.Join(binDir, f.Name()), Mode: f.Mode, UID: f.UID, GID: f.GID})
	}
	img, err := ociimage.Build(ociimage.Image{
		Name:         "driver image " + version,
		Base:         base,
		Files:        files,
		Entrypoint:   Config.Entrypoint,
		Cmd:          Config.Cmd,
		User:         Config.User,
		WorkingDir:   Config.WorkingDir,
		Labels:       Labels(version, revision),
		Architecture: arch,
	})
	if err != nil {
		return nil, fmt.Errorf("build the driver image: %w", err)
	}
	return img, nil
}

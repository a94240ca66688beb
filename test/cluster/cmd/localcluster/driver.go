package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/driverimage"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/localcluster"
)

// driverFlags are the flags of the image, install and uninstall commands.
type driverFlags struct {
	version, revision, ldflags, tags, outDir, repository, sourceRef string
	helm, values, archive                                           string
}

// options returns the image build options; relative paths are taken from repo.
func (d driverFlags) options(repo, goCmd string) driverimage.Options {
	return driverimage.Options{
		Repo: repo, Go: goCmd, Version: d.version, Revision: d.revision, LDFlags: d.ldflags, Tags: d.tags,
		Repository: d.repository, OutDir: abs(repo, d.outDir), SourceRef: d.sourceRef,
	}
}

func (d driverFlags) buildImage(ctx context.Context, log *slog.Logger, repo, goCmd string) error {
	if d.version == "" {
		return errors.New("image: -version (VERSION) is required")
	}
	o := d.options(repo, goCmd)
	archive, err := driverimage.Build(ctx, o)
	if err != nil {
		return err
	}
	log.Info("wrote driver image", "image", o.Ref(), "archive", archive)
	return nil
}

func (d driverFlags) installOptions(repo string) localcluster.DriverOptions {
	helm := d.helm
	if strings.Contains(helm, "/") {
		helm = abs(repo, helm)
	}
	o := localcluster.DriverOptions{Helm: helm, Repository: d.repository, Tag: d.version, Archive: d.archive}
	if o.Archive == "" && d.version != "" {
		o.Archive = d.options(repo, "").ArchivePath()
	} else if o.Archive != "" {
		o.Archive = abs(repo, o.Archive)
	}
	for _, v := range strings.Split(d.values, ",") {
		if v = strings.TrimSpace(v); v != "" {
			o.ValuesFiles = append(o.ValuesFiles, abs(repo, v))
		}
	}
	return o
}

// abs resolves p against repo unless it is absolute.
func abs(repo, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(repo, p)
}

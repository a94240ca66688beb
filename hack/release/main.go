// Command release keeps the release's version in one place and reads the release notes.
// The Makefile runs it; every subcommand works on a checkout, without a cluster or a
// registry (docs/release.md).
//
//	release check -version 0.1.0 -repository ghcr.io/rdma-dra/rdma-dra-driver
//	    make release-check: the VERSION file, the chart's version and appVersion, the
//	    values' image, the images of deployments/static and the CHANGELOG agree.
//	release set-chart -version 0.1.0
//	    make manifests: write the version into Chart.yaml (version, appVersion).
//	release notes -version 0.1.0 -o FILE
//	    make release-notes: the CHANGELOG section of the version, the release's notes.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

const usage = "usage: release check|set-chart|notes [flags] (-h for the flags of one)"

func run(args []string) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	repo := fs.String("repo", ".", "root of the repository")
	version := fs.String("version", "", "the version X.Y.Z (a leading v is dropped); default: the VERSION file")
	switch cmd {
	case "check":
		repository := fs.String("repository", "", "the image repository the chart must default to, e.g. ghcr.io/rdma-dra/rdma-dra-driver (required)")
		if err := fs.Parse(args); err != nil {
			return err
		}
		if *repository == "" {
			return errors.New("check: -repository is required")
		}
		l := layoutAt(*repo)
		v, err := resolveVersion(l, *version)
		if err != nil {
			return err
		}
		if err := check(l, v, *repository); err != nil {
			return err
		}
		fmt.Printf("release %s: VERSION, Chart.yaml, values.yaml, %s and %s agree\n", v, l.staticDir, l.changelog)
		return nil
	case "set-chart":
		if err := fs.Parse(args); err != nil {
			return err
		}
		l := layoutAt(*repo)
		v, err := resolveVersion(l, *version)
		if err != nil {
			return err
		}
		return setChartVersion(l.chartFile, v)
	case "notes":
		out := fs.String("o", "", "write the notes to this file instead of standard output")
		if err := fs.Parse(args); err != nil {
			return err
		}
		l := layoutAt(*repo)
		v, err := resolveVersion(l, *version)
		if err != nil {
			return err
		}
		notes, err := changelogSection(l.changelog, v)
		if err != nil {
			return err
		}
		if *out == "" {
			_, err = os.Stdout.WriteString(notes)
			return err
		}
		if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
			return err
		}
		return os.WriteFile(*out, []byte(notes), 0o644)
	}
	return fmt.Errorf("unknown subcommand %q; %s", cmd, usage)
}

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// layout names the files that carry the version, relative to the repository's root.
type layout struct {
	versionFile, chartFile, valuesFile, staticDir, changelog string
}

func layoutAt(repo string) layout {
	chart := filepath.Join(repo, "deployments", "helm", "rdma-dra-driver")
	return layout{
		versionFile: filepath.Join(repo, "VERSION"),
		chartFile:   filepath.Join(chart, "Chart.yaml"),
		valuesFile:  filepath.Join(chart, "values.yaml"),
		staticDir:   filepath.Join(repo, "deployments", "static"),
		changelog:   filepath.Join(repo, "CHANGELOG.md"),
	}
}

// semVer is a SemVer 2.0 version without the v: what the chart's version must be, and so
// the one form VERSION takes (the image tag adds the v).
var semVer = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?` +
	`(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$`)

// readVersionFile returns the VERSION file's version: one SemVer line, without a v.
func readVersionFile(file string) (string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("read the version: %w", err)
	}
	v := strings.TrimSpace(string(data))
	if !semVer.MatchString(v) {
		return "", fmt.Errorf("%s: %q is not a version X.Y.Z (SemVer, without a leading v)", file, v)
	}
	return v, nil
}

// resolveVersion returns the version flag without its v, or the VERSION file's when the
// flag is empty.
func resolveVersion(l layout, flagValue string) (string, error) {
	if flagValue == "" {
		return readVersionFile(l.versionFile)
	}
	v := strings.TrimPrefix(flagValue, "v")
	if !semVer.MatchString(v) {
		return "", fmt.Errorf("-version %q is not a version X.Y.Z (SemVer)", flagValue)
	}
	return v, nil
}

// check returns every disagreement between version and what the repository says, joined,
// or nil. version comes from the Makefile: a tag vX.Y.Z on HEAD, else the VERSION file.
func check(l layout, version, repository string) error {
	var errs []error
	if fileVersion, err := readVersionFile(l.versionFile); err != nil {
		errs = append(errs, err)
	} else if fileVersion != version {
		errs = append(errs, fmt.Errorf("%s says %s but the version released is %s (a tag v%s on HEAD, or VERSION=): "+
			"run make set-version VERSION=%s and commit it before tagging", l.versionFile, fileVersion, version, version, version))
	}
	errs = append(errs, checkChart(l.chartFile, version)...)
	errs = append(errs, checkValues(l.valuesFile, repository)...)
	errs = append(errs, checkStatic(l.staticDir, repository+":v"+version)...)
	if _, err := changelogSection(l.changelog, version); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// chartMeta holds the fields of Chart.yaml that carry the version.
type chartMeta struct {
	Version    string `json:"version"`
	AppVersion string `json:"appVersion"`
}

func checkChart(file, version string) []error {
	data, err := os.ReadFile(file)
	if err != nil {
		return []error{fmt.Errorf("read the chart: %w", err)}
	}
	var c chartMeta
	if err := yaml.Unmarshal(data, &c); err != nil {
		return []error{fmt.Errorf("decode %s: %w", file, err)}
	}
	var errs []error
	if c.Version != version {
		errs = append(errs, fmt.Errorf("%s: version is %q, want %q: run make manifests", file, c.Version, version))
	}
	if c.AppVersion != "v"+version {
		errs = append(errs, fmt.Errorf("%s: appVersion is %q, want %q (the image tag): run make manifests", file, c.AppVersion, "v"+version))
	}
	return errs
}

// checkValues requires the chart's default image to be the released repository with no
// tag of its own, so that the tag is the chart's appVersion.
func checkValues(file, repository string) []error {
	data, err := os.ReadFile(file)
	if err != nil {
		return []error{fmt.Errorf("read the chart's values: %w", err)}
	}
	var v struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return []error{fmt.Errorf("decode %s: %w", file, err)}
	}
	var errs []error
	if v.Image.Repository != repository {
		errs = append(errs, fmt.Errorf("%s: image.repository is %q, want %q (the repository make push publishes to)", file, v.Image.Repository, repository))
	}
	if v.Image.Tag != "" {
		errs = append(errs, fmt.Errorf("%s: image.tag is %q, want empty: the tag defaults to the chart's appVersion", file, v.Image.Tag))
	}
	return errs
}

// checkStatic requires every image of the rendered manifests to be image. Finding none is
// an error too: the check would prove nothing.
func checkStatic(dir, image string) []error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return []error{err}
	}
	var errs []error
	found := 0
	for _, f := range files {
		images, err := manifestImages(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wrong := map[string]bool{}
		for _, got := range images {
			found++
			if got != image && !wrong[got] {
				wrong[got] = true
				errs = append(errs, fmt.Errorf("%s: image %s, want %s: run make manifests", f, got, image))
			}
		}
	}
	if found == 0 && len(errs) == 0 {
		errs = append(errs, fmt.Errorf("%s: no image in the manifests (want %s): run make manifests", dir, image))
	}
	return errs
}

// manifestImages returns the value of every "image" key of every document of file, in
// the order they appear. Only the containers of pods have such a key in the chart.
func manifestImages(file string) ([]string, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read the manifests: %w", err)
	}
	var images []string
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return images, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: split document %d: %w", file, i, err)
		}
		var obj any
		if err := yaml.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		images = appendImages(images, obj)
	}
}

func appendImages(images []string, v any) []string {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, ok := v[k].(string); ok && k == "image" {
				images = append(images, s)
				continue
			}
			images = appendImages(images, v[k])
		}
	case []any:
		for _, e := range v {
			images = appendImages(images, e)
		}
	}
	return images
}

// chartVersionLine matches the top-level version and appVersion lines of Chart.yaml.
var chartVersionLine = regexp.MustCompile(`(?m)^(version|appVersion):.*$`)

// setChartVersion writes version into Chart.yaml: version X.Y.Z and appVersion vX.Y.Z
// (the image tag). The rest of the file, comments included, stays as it is.
func setChartVersion(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read the chart: %w", err)
	}
	seen := map[string]int{}
	out := chartVersionLine.ReplaceAllFunc(data, func(line []byte) []byte {
		key := string(line[:bytes.IndexByte(line, ':')])
		seen[key]++
		if key == "version" {
			return []byte("version: " + version)
		}
		return []byte(`appVersion: "v` + version + `"`)
	})
	for _, key := range []string{"version", "appVersion"} {
		if seen[key] != 1 {
			return fmt.Errorf("%s: want one top-level %s line, found %d", file, key, seen[key])
		}
	}
	if bytes.Equal(out, data) {
		return nil
	}
	return os.WriteFile(file, out, 0o644)
}

package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/BurntSushi/toml"
)

// containerd's configuration, as far as the driver cares. Keys, tables and defaults
// (verified against upstream, see docs/cli.md "Sources"):
//
//   - Config version 3 (containerd 2.x) keeps the CRI runtime settings in
//     [plugins."io.containerd.cri.v1.runtime"]; version 2 (containerd 1.x, still read by
//     2.x and migrated) in [plugins."io.containerd.grpc.v1.cri"]; version 1 (the default
//     of 1.x when the file has no version) in [plugins.cri].
//     https://github.com/containerd/containerd/blob/main/docs/cri/config.md
//   - enable_cdi is false by default in containerd 1.7 (a backport that would have turned
//     it on was declined: https://github.com/containerd/containerd/pull/9666) and true from
//     2.0 (https://github.com/containerd/containerd/blob/main/docs/containerd-2.0.md); it
//     is deprecated in 2.2 and removed in 2.4, where CDI is always on
//     (https://github.com/containerd/containerd/blob/main/RELEASES.md, "Deprecated config
//     properties").
//   - cdi_spec_dirs defaults to ["/etc/cdi", "/var/run/cdi"] in 1.7 and 2.x.
//   - NRI is [plugins."io.containerd.nri.v1.nri"]: disable (true by default in 1.7, false
//     from 2.0), socket_path (default /var/run/nri/nri.sock), disable_connections
//     (default false; true refuses externally started plugins such as the driver's).
//     https://github.com/containerd/containerd/blob/main/docs/NRI.md and, for 1.7,
//     https://github.com/containerd/containerd/blob/release/1.7/docs/NRI.md
//   - imports names more files (globs; relative to the importing file); they are read
//     after it, and a plugin table in a later file replaces the earlier one whole.
const (
	containerdCRIv3 = "io.containerd.cri.v1.runtime"
	containerdCRIv2 = "io.containerd.grpc.v1.cri"
	containerdCRIv1 = "cri"
	containerdNRI   = "io.containerd.nri.v1.nri"
)

// containerdConfig is what the driver needs from containerd's configuration.
type containerdConfig struct {
	// path is the main file; exists is false when there is none (built-in defaults).
	path   string
	exists bool
	// version is the main file's version: 1 when it says none.
	version int
	// cri and nri are the effective CRI runtime and NRI tables, nil when no file has
	// them; criFrom and nriFrom name the file each came from.
	cri, nri         map[string]any
	criFrom, nriFrom string
}

// maxImports bounds the files read through imports, against a loop of globs.
const maxImports = 64

// loadContainerd reads path and the files it imports. A missing main file is no error:
// containerd then runs with its built-in defaults.
func loadContainerd(path string) (*containerdConfig, error) {
	c := &containerdConfig{path: path}
	pending, loaded := []string{path}, map[string]bool{}
	for len(pending) > 0 && len(loaded) < maxImports {
		p := pending[0]
		pending = pending[1:]
		if loaded[p] {
			continue
		}
		loaded[p] = true
		data, err := os.ReadFile(p)
		if p == path && errors.Is(err, fs.ErrNotExist) {
			return c, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read containerd config: %w", err)
		}
		doc, version, err := decodeContainerd(data)
		if err != nil {
			return nil, fmt.Errorf("parse containerd config %s: %w", p, err)
		}
		if p == path {
			c.exists, c.version = true, version
		}
		plugins, _ := doc["plugins"].(map[string]any)
		if t := criTable(plugins, version); t != nil {
			c.cri, c.criFrom = t, p
		}
		if t, ok := plugins[containerdNRI].(map[string]any); ok {
			c.nri, c.nriFrom = t, p
		}
		imports, err := resolveImports(p, doc["imports"])
		if err != nil {
			return nil, fmt.Errorf("resolve imports of %s: %w", p, err)
		}
		pending = append(pending, imports...)
	}
	return c, nil
}

// decodeContainerd parses one containerd config file and returns its version (1 when
// the file has none).
func decodeContainerd(data []byte) (map[string]any, int, error) {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil, 0, err
	}
	version := 1
	if v, ok := doc["version"]; ok {
		n, ok := v.(int64)
		if !ok || n < 1 || n > 3 {
			return nil, 0, fmt.Errorf("version = %v: want 1, 2 or 3", v)
		}
		version = int(n)
	}
	return doc, version, nil
}

// criTable is a file's table of CRI runtime settings for its version.
func criTable(plugins map[string]any, version int) map[string]any {
	names := map[int][]string{3: {containerdCRIv3}, 2: {containerdCRIv2}, 1: {containerdCRIv1, containerdCRIv2}}[version]
	for _, n := range names {
		if t, ok := plugins[n].(map[string]any); ok {
			return t
		}
	}
	return nil
}

// resolveImports turns an imports value into paths: globs expanded, relative paths taken
// relative to the importing file's directory.
func resolveImports(parent string, v any) ([]string, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("imports = %v: want a list of paths", v)
	}
	var out []string
	for _, item := range list {
		p, ok := item.(string)
		if !ok {
			return nil, fmt.Errorf("imports entry %v: want a path", item)
		}
		p = filepath.Clean(p)
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(parent), p)
		}
		if !strings.Contains(p, "*") {
			out = append(out, p)
			continue
		}
		matches, err := filepath.Glob(p)
		if err != nil {
			return nil, err
		}
		out = append(out, matches...)
	}
	return out, nil
}

// criSection is the table a fix names, for the main file's version.
func (c *containerdConfig) criSection() string {
	if c.version >= 3 {
		return `[plugins."` + containerdCRIv3 + `"]`
	}
	return `[plugins."` + containerdCRIv2 + `"]`
}

// boolKey returns t[key] when it is a boolean.
func boolKey(t map[string]any, key string) (value, set bool) {
	v, ok := t[key].(bool)
	return v, ok
}

// stringKey returns t[key] when it is a string.
func stringKey(t map[string]any, key string) (string, bool) {
	v, ok := t[key].(string)
	return v, ok
}

// stringsKey returns t[key] when it is a list of strings.
func stringsKey(t map[string]any, key string) ([]string, bool) {
	list, ok := t[key].([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, item := range list {
		s, ok := item.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

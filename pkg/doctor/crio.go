package doctor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// CRI-O's configuration, as far as the driver cares (verified against upstream, see
// docs/cli.md "Sources"):
//
//   - CDI has no switch: it is always on, and [crio.runtime] cdi_spec_dirs defaults to
//     ["/etc/cdi", "/var/run/cdi"]; crio --cdi-spec-dirs overrides the file.
//     https://github.com/cri-o/cri-o/blob/main/docs/crio.conf.5.md
//   - [crio.nri] enable_nri is true by default from CRI-O 1.30 (commit bf5cc00, "config,
//     docs, completions: enable NRI by default") and false before; nri_listen defaults to
//     /var/run/nri/nri.sock; nri_disable_connections (default false) refuses externally
//     started plugins such as the driver's.
//   - [crio.runtime] default_ulimits ("memlock=SOFT:HARD", -1 for unlimited, as
//     github.com/docker/go-units parses it) sets the containers' limits; without it they
//     inherit the daemon's.
//   - The drop-in directory (crio.conf.d) is read after the main file, its files in
//     lexical order, a later file's option overriding an earlier one's.
//     https://github.com/cri-o/cri-o/blob/main/docs/crio.conf.d.5.md
const (
	crioRuntimeTable = "runtime"
	crioNRITable     = "nri"
)

// crioConfig is what the driver needs from CRI-O's configuration.
type crioConfig struct {
	// path is the main file and dropIns its drop-in directory; exists is false when
	// neither has a file (built-in defaults).
	path, dropIns string
	exists        bool
	// values holds the effective options by table (runtime, nri) and key; from names
	// the file each came from, by "table.key".
	values map[string]map[string]any
	from   map[string]string
}

// loadCRIO reads path and then every file of path+".d", in lexical order. Missing files
// are no error: CRI-O then runs with its built-in defaults.
func loadCRIO(path string) (*crioConfig, error) {
	c := &crioConfig{path: path, dropIns: path + ".d", values: map[string]map[string]any{}, from: map[string]string{}}
	files := []string{path}
	err := filepath.WalkDir(c.dropIns, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read CRI-O drop-in directory: %w", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read CRI-O config: %w", err)
		}
		c.exists = true
		var doc map[string]any
		if _, err := toml.Decode(string(data), &doc); err != nil {
			return nil, fmt.Errorf("parse CRI-O config %s: %w", f, err)
		}
		crio, _ := doc["crio"].(map[string]any)
		for _, table := range []string{crioRuntimeTable, crioNRITable} {
			t, ok := crio[table].(map[string]any)
			if !ok {
				continue
			}
			if c.values[table] == nil {
				c.values[table] = map[string]any{}
			}
			for k, v := range t {
				c.values[table][k] = v
				c.from[table+"."+k] = f
			}
		}
	}
	return c, nil
}

// table returns the effective options of one table (never nil).
func (c *crioConfig) table(name string) map[string]any {
	if t := c.values[name]; t != nil {
		return t
	}
	return map[string]any{}
}

// source says where an option came from, for a finding: "in /etc/crio/crio.conf.d/10.conf".
func (c *crioConfig) source(table, key string) string {
	if f, ok := c.from[table+"."+key]; ok {
		return "in " + f
	}
	return "by default"
}

// crioMemlock returns the memlock entry of default_ulimits ("memlock=SOFT[:HARD]"), if
// there is one; the last one wins, as CRI-O applies them in order.
func crioMemlock(c *crioConfig) (soft, hard rlimit, set bool, err error) {
	list, ok := stringsKey(c.table(crioRuntimeTable), "default_ulimits")
	if !ok {
		return soft, hard, false, nil
	}
	for _, u := range list {
		name, val, ok := strings.Cut(u, "=")
		if !ok || name != "memlock" {
			continue
		}
		s, h, hasHard := strings.Cut(val, ":")
		if !hasHard {
			h = s
		}
		if soft, err = parseUlimit(s); err != nil {
			return soft, hard, true, fmt.Errorf("default_ulimits %q: %w", u, err)
		}
		if hard, err = parseUlimit(h); err != nil {
			return soft, hard, true, fmt.Errorf("default_ulimits %q: %w", u, err)
		}
		set = true
	}
	return soft, hard, set, nil
}

// parseUlimit parses one value of a ulimit entry: bytes, or -1 for unlimited.
func parseUlimit(s string) (rlimit, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	switch {
	case err != nil:
		return rlimit{}, fmt.Errorf("%q is not a number", s)
	case v == -1:
		return rlimit{unlimited: true}, nil
	case v < 0:
		return rlimit{}, fmt.Errorf("%d is negative", v)
	}
	return rlimit{bytes: uint64(v)}, nil
}

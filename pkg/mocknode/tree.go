package mocknode

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// entryKind says what a tree entry becomes on disk.
type entryKind int

const (
	kindDir entryKind = iota
	kindFile
	kindLink
)

type entry struct {
	kind entryKind
	// data is the file content, or the link target relative to the link's directory.
	data string
}

// tree is a sysfs tree built in memory first, so that a description that would put two
// things at one path fails before anything is written, and the output does not depend on
// the order in which the layout code runs.
type tree struct {
	entries map[string]entry
	err     error
}

func newTree() *tree { return &tree{entries: map[string]entry{}} }

func (t *tree) put(p string, e entry) {
	if old, ok := t.entries[p]; ok {
		if old == e && e.kind == kindDir {
			return
		}
		if t.err == nil {
			t.err = fmt.Errorf("lay out %s: path written twice", p)
		}
		return
	}
	t.entries[p] = e
}

// dir records a directory that must exist even when empty.
func (t *tree) dir(p string) { t.put(p, entry{kind: kindDir}) }

// file records a one-value sysfs file; the kernel ends every value with a newline.
func (t *tree) file(p, value string) { t.put(p, entry{kind: kindFile, data: value + "\n"}) }

// raw records a binary file that holds data as it is, without a newline: a vpd file.
func (t *tree) raw(p string, data []byte) { t.put(p, entry{kind: kindFile, data: string(data)}) }

// link records a symlink at p to the root-relative path target, spelled the way the kernel
// spells it (see kernelRel).
func (t *tree) link(p, target string) {
	t.put(p, entry{kind: kindLink, data: kernelRel(filepath.Dir(p), target)})
}

// kernelRel returns the relative path from directory from to target the way sysfs builds
// it: climb until reaching a strict ancestor of target, then descend. So a link to an
// ancestor still ends in the ancestor's name (../../../0000:03:00.0, not ../..), as on a
// real node.
func kernelRel(from, target string) string {
	split := func(p string) []string {
		if p == "." || p == "" {
			return nil
		}
		return strings.Split(p, "/")
	}
	base, tgt := split(from), split(target)
	ups := 0
	for !(len(base) < len(tgt) && equalPrefix(base, tgt)) {
		base = base[:len(base)-1]
		ups++
	}
	return strings.Repeat("../", ups) + strings.Join(tgt[len(base):], "/")
}

func equalPrefix(prefix, s []string) bool {
	for i := range prefix {
		if prefix[i] != s[i] {
			return false
		}
	}
	return true
}

// writeTo creates the tree below root. Paths are processed in sorted order, so parents
// come before children, and each directory is created once: large nodes have tens of
// thousands of entries.
func (t *tree) writeTo(root string) error {
	if t.err != nil {
		return t.err
	}
	paths := make([]string, 0, len(t.entries))
	for p := range t.entries {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	made := map[string]bool{}
	var mkdir func(dir string) error
	mkdir = func(dir string) error {
		if made[dir] {
			return nil
		}
		if parent := filepath.Dir(dir); parent != dir {
			if err := mkdir(parent); err != nil {
				return err
			}
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory: %w", err)
		}
		made[dir] = true
		return nil
	}
	for _, p := range paths {
		e := t.entries[p]
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := mkdir(filepath.Dir(full)); err != nil {
			return err
		}
		var err error
		switch e.kind {
		case kindDir:
			err = mkdir(full)
		case kindFile:
			err = os.WriteFile(full, []byte(e.data), 0o644)
		case kindLink:
			err = os.Symlink(e.data, full)
		}
		if err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

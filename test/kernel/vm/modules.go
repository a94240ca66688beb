package vm

import (
	"bufio"
	"bytes"
	"debug/elf"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Modules is the module tree of one kernel release in an extracted package tree.
type Modules struct {
	// Release is the kernel release, the directory name below lib/modules.
	Release string
	// dir is root/lib/modules/<release>.
	dir string
	// paths maps a module name (underscores) to its file, relative to dir.
	paths map[string]string
	// builtin holds the names of the modules built into the kernel.
	builtin map[string]bool
}

// moduleName is the kernel's name of a module file: its base name without .ko, with
// dashes as underscores.
func moduleName(file string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(file), ".ko"), "-", "_")
}

// OpenModules indexes the one kernel release below root/lib/modules.
func OpenModules(root string) (*Modules, error) {
	base := filepath.Join(root, "lib", "modules")
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	if len(entries) != 1 {
		return nil, fmt.Errorf("%s: want one kernel release, found %d", base, len(entries))
	}
	m := &Modules{Release: entries[0].Name(), dir: filepath.Join(base, entries[0].Name()), paths: map[string]string{}, builtin: map[string]bool{}}
	err = filepath.WalkDir(filepath.Join(m.dir, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".ko") {
			rel, _ := filepath.Rel(m.dir, path)
			m.paths[moduleName(path)] = rel
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("kernel modules: %w", err)
	}
	if len(m.paths) == 0 {
		return nil, fmt.Errorf("%s: no .ko files (compressed modules are not supported)", m.dir)
	}
	if data, err := os.ReadFile(filepath.Join(m.dir, "modules.builtin")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); line != "" {
				m.builtin[moduleName(line)] = true
			}
		}
	}
	return m, nil
}

// Path returns a module's file, relative to lib/modules/<release>.
func (m *Modules) Path(name string) (string, bool) {
	p, ok := m.paths[name]
	return p, ok
}

// dependsOf reads the depends= entry of a module's .modinfo section.
func dependsOf(file string) ([]string, error) {
	f, err := elf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sec := f.Section(".modinfo")
	if sec == nil {
		return nil, fmt.Errorf("%s: no .modinfo section", file)
	}
	data, err := sec.Data()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for _, kv := range bytes.Split(data, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("depends=")); ok {
			if len(v) == 0 {
				return nil, nil
			}
			return strings.Split(string(v), ","), nil
		}
	}
	return nil, nil
}

// LoadOrder returns the modules to insmod, each after its dependencies, for the named
// modules; built-in dependencies are left out, an unknown module is an error.
func (m *Modules) LoadOrder(names []string) ([]string, error) {
	var order []string
	state := map[string]int{} // 1: visiting, 2: done
	var visit func(name, from string) error
	visit = func(name, from string) error {
		switch state[name] {
		case 1:
			return fmt.Errorf("module dependency cycle through %s", name)
		case 2:
			return nil
		}
		rel, ok := m.paths[name]
		if !ok {
			if m.builtin[name] {
				state[name] = 2
				return nil
			}
			if from != "" {
				return fmt.Errorf("module %s (needed by %s) is not in kernel %s", name, from, m.Release)
			}
			return fmt.Errorf("module %s is not in kernel %s", name, m.Release)
		}
		state[name] = 1
		deps, err := dependsOf(filepath.Join(m.dir, rel))
		if err != nil {
			return err
		}
		for _, d := range deps {
			if err := visit(moduleName(d), name); err != nil {
				return err
			}
		}
		state[name] = 2
		order = append(order, name)
		return nil
	}
	for _, n := range names {
		if err := visit(n, ""); err != nil {
			return nil, err
		}
	}
	return order, nil
}

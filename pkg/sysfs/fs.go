// Package sysfs reads the kernel's RDMA layout (see the project's sysfs.md) below a root
// directory, read-only, and parses its values.
//
// Every path is relative to the root and every symbolic link is resolved by this package,
// one component at a time, with a bound on the number of links followed. A link that points
// above the root, or to an absolute path, is refused: whatever the tree holds, discovery
// never reads outside the root it was given.
package sysfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"sync"
)

// DefaultRoot is where the kernel mounts sysfs on a live host.
const DefaultRoot = "/sys"

// MaxLinkHops bounds the symbolic links followed while resolving one path, as the kernel
// bounds path walks (ELOOP), so that a cycle in a tree ends in an error.
const MaxLinkHops = 40

var (
	// ErrOutsideRoot is returned for a path or link target that would leave the root.
	ErrOutsideRoot = errors.New("path leaves the sysfs root")
	// ErrTooManyLinks is returned when resolving a path follows more than MaxLinkHops links.
	ErrTooManyLinks = errors.New("too many levels of symbolic links")
)

// FS is a read-only view of a sysfs tree.
//
// It caches resolved directories, so it describes the tree as of one scan: make a new FS
// for every scan. An FS is safe for concurrent use.
type FS struct {
	fsys  fs.ReadLinkFS
	close func() error

	mu sync.Mutex
	// resolved maps a path as the caller spelled it to its canonical path, which holds no
	// symbolic link and stays below the root.
	resolved map[string]string
}

// Open returns an FS over the directory root. It fails when root is not a usable directory.
// The OS-level root (os.Root) refuses escapes by itself too, so even a tree that changes
// between resolving and opening cannot lead outside root.
func Open(root string) (*FS, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return nil, fmt.Errorf("open sysfs root: %w", err)
	}
	info, err := r.Stat(".")
	if err != nil {
		_ = r.Close()
		return nil, fmt.Errorf("stat sysfs root: %w", err)
	}
	if !info.IsDir() {
		_ = r.Close()
		return nil, fmt.Errorf("open sysfs root %s: not a directory", root)
	}
	fsys, ok := r.FS().(fs.ReadLinkFS)
	if !ok {
		_ = r.Close()
		return nil, fmt.Errorf("open sysfs root %s: file system cannot read links", root)
	}
	f := NewFS(fsys)
	f.close = r.Close
	return f, nil
}

// NewFS returns an FS over fsys, e.g. an in-memory testing/fstest.MapFS tree.
func NewFS(fsys fs.ReadLinkFS) *FS {
	return &FS{fsys: fsys, resolved: map[string]string{}}
}

// Close releases the root directory of an FS made by Open; it is a no-op otherwise.
func (f *FS) Close() error {
	if f.close == nil {
		return nil
	}
	return f.close()
}

// Resolve returns the canonical path of name: relative to the root, without symbolic links.
// name must exist.
func (f *FS) Resolve(name string) (string, error) {
	if !fs.ValidPath(name) {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: fs.ErrInvalid}
	}
	hops := 0
	p, err := f.resolve(name, &hops)
	if err != nil {
		return "", &fs.PathError{Op: "resolve", Path: name, Err: err}
	}
	return p, nil
}

// resolve is Resolve for a valid path; hops counts the links followed so far.
func (f *FS) resolve(name string, hops *int) (string, error) {
	if name == "." {
		return ".", nil
	}
	f.mu.Lock()
	p, ok := f.resolved[name]
	f.mu.Unlock()
	if ok {
		return p, nil
	}
	dir, err := f.resolve(path.Dir(name), hops)
	if err != nil {
		return "", err
	}
	p, err = f.step(dir, path.Base(name), hops)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.resolved[name] = p
	f.mu.Unlock()
	return p, nil
}

// step resolves the single component elem inside the canonical directory dir.
func (f *FS) step(dir, elem string, hops *int) (string, error) {
	switch elem {
	case ".":
		return dir, nil
	case "..":
		if dir == "." {
			return "", ErrOutsideRoot
		}
		return path.Dir(dir), nil
	}
	p := path.Join(dir, elem)
	info, err := f.fsys.Lstat(p)
	if err != nil {
		return "", err
	}
	if info.Mode()&fs.ModeSymlink == 0 {
		return p, nil
	}
	*hops++
	if *hops > MaxLinkHops {
		return "", ErrTooManyLinks
	}
	target, err := f.fsys.ReadLink(p)
	if err != nil {
		return "", err
	}
	if target == "" || strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("link %s -> %q: %w", p, target, ErrOutsideRoot)
	}
	cur := dir
	for _, e := range strings.Split(target, "/") {
		if e == "" {
			continue
		}
		if cur, err = f.step(cur, e, hops); err != nil {
			return "", err
		}
	}
	return cur, nil
}

// ReadString returns the content of the file name without its trailing newline.
func (f *FS) ReadString(name string) (string, error) {
	p, err := f.Resolve(name)
	if err != nil {
		return "", err
	}
	b, err := fs.ReadFile(f.fsys, p)
	if err != nil {
		return "", err
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}

// ReadDirNames returns the sorted names of the entries of the directory name.
func (f *FS) ReadDirNames(name string) ([]string, error) {
	p, err := f.Resolve(name)
	if err != nil {
		return nil, err
	}
	entries, err := fs.ReadDir(f.fsys, p)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	slices.Sort(names)
	return names, nil
}

// LinkBase returns the last component of the target of the symbolic link name, without
// following it: the driver of a PCI function (driver -> …/drivers/mlx5_core), the PF of a
// VF (physfn -> ../0000:3b:00.0), the bond of a slave (master -> ../bond0). The target need
// not exist below the root.
func (f *FS) LinkBase(name string) (string, error) {
	if !fs.ValidPath(name) || name == "." {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	dir, err := f.Resolve(path.Dir(name))
	if err != nil {
		return "", err
	}
	target, err := f.fsys.ReadLink(path.Join(dir, path.Base(name)))
	if err != nil {
		return "", err
	}
	base := path.Base(strings.TrimRight(target, "/"))
	if base == "." || base == ".." || base == "/" || base == "" {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fmt.Errorf("target %q names no entry", target)}
	}
	return base, nil
}

// Exists reports whether name exists (after resolving links). Errors other than
// non-existence, such as a link that leaves the root, count as not existing.
func (f *FS) Exists(name string) bool {
	_, err := f.Resolve(name)
	return err == nil
}

// Lexists reports whether name itself exists, without following a final symbolic link.
func (f *FS) Lexists(name string) bool {
	if !fs.ValidPath(name) {
		return false
	}
	dir, err := f.Resolve(path.Dir(name))
	if err != nil {
		return false
	}
	_, err = f.fsys.Lstat(path.Join(dir, path.Base(name)))
	return err == nil
}

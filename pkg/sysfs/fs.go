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
// It caches directory listings and resolved paths, so it describes the tree as of one
// scan: make a new FS for every scan. Caching listings is what keeps a scan cheap: a
// component is looked up (and its type, link or not, known) from its directory's listing,
// read once, instead of one lstat per component and file. An FS is safe for concurrent use.
type FS struct {
	fsys fs.ReadLinkFS
	// dir is the root directory on disk, set by Open; files below it are read with plain
	// system calls (see readFile), the cost that dominates a scan.
	dir string

	mu sync.Mutex
	// resolved maps a path as the caller spelled it to its canonical path, which holds no
	// symbolic link and stays below the root.
	resolved map[string]string
	// listings maps a canonical directory to its entries' type bits, or to the error of
	// listing it.
	listings map[string]listing
	// types maps a canonical path to the type bits an lstat found.
	types map[string]entryType
}

type listing struct {
	types map[string]fs.FileMode
	names []string // sorted
	err   error
}

// Open returns an FS over the directory root. It fails when root is not a usable directory.
//
// Files are opened by their canonical path, every component of which this package has
// seen to be a directory, not a link; the kernel owns sysfs, so the tree cannot be
// changed between that check and the open by anyone who could not read any file anyway.
func Open(root string) (*FS, error) {
	info, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("open sysfs root: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("open sysfs root %s: not a directory", root)
	}
	fsys, ok := os.DirFS(root).(fs.ReadLinkFS)
	if !ok {
		return nil, fmt.Errorf("open sysfs root %s: file system cannot read links", root)
	}
	f := NewFS(fsys)
	f.dir = root
	return f, nil
}

// NewFS returns an FS over fsys, e.g. an in-memory testing/fstest.MapFS tree.
func NewFS(fsys fs.ReadLinkFS) *FS {
	return &FS{fsys: fsys, resolved: map[string]string{}, listings: map[string]listing{}, types: map[string]entryType{}}
}

// SizeHint is how many paths, directories and lstat results an FS remembered: a scan of
// the same tree with the hint of the previous one sizes its caches once instead of
// growing them step by step (which allocated a fifth of a scan's bytes on a large node).
type SizeHint struct {
	Resolved, Listings, Types int
}

// Hint returns the sizes of f's caches now, for the next scan's [FS.Reserve].
func (f *FS) Hint() SizeHint {
	f.mu.Lock()
	defer f.mu.Unlock()
	return SizeHint{Resolved: len(f.resolved), Listings: len(f.listings), Types: len(f.types)}
}

// Reserve sizes the caches of a new FS for h; it is a no-op on an FS already in use.
func (f *FS) Reserve(h SizeHint) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.resolved)+len(f.listings)+len(f.types) > 0 {
		return
	}
	f.resolved = make(map[string]string, h.Resolved)
	f.listings = make(map[string]listing, h.Listings)
	f.types = make(map[string]entryType, h.Types)
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
	parent := path.Dir(name)
	dir, err := f.resolve(parent, hops)
	if err != nil {
		return "", err
	}
	// Until a link is crossed the canonical path is the name itself: no new string.
	joined := ""
	if dir == parent {
		joined = name
	}
	p, err = f.step(dir, path.Base(name), joined, hops)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	f.resolved[name] = p
	f.mu.Unlock()
	return p, nil
}

// list returns the listing of the canonical directory dir, reading it once.
func (f *FS) list(dir string) listing {
	f.mu.Lock()
	l, ok := f.listings[dir]
	f.mu.Unlock()
	if ok {
		return l
	}
	entries, err := fs.ReadDir(f.fsys, dir)
	if err != nil {
		l = listing{err: err}
	} else {
		l = listing{types: make(map[string]fs.FileMode, len(entries)), names: make([]string, len(entries))}
		for i, e := range entries {
			l.types[e.Name()] = e.Type()
			l.names[i] = e.Name()
		}
		slices.Sort(l.names)
	}
	f.mu.Lock()
	f.listings[dir] = l
	f.mu.Unlock()
	return l
}

// lookup returns the type bits of elem in the canonical directory dir: from the
// directory's listing if it has been read, else from one lstat, remembered for the scan.
// Listing a directory costs several system calls, an lstat one, and most directories on
// a path are looked into once.
func (f *FS) lookup(dir, elem string) (fs.FileMode, error) {
	return f.lookupPath(dir, elem, join(dir, elem))
}

// lookupPath is lookup for callers that have joined p = dir/elem already.
func (f *FS) lookupPath(dir, elem, p string) (fs.FileMode, error) {
	f.mu.Lock()
	l, listed := f.listings[dir]
	t, statted := f.types[p]
	f.mu.Unlock()
	switch {
	case listed:
		if l.err != nil {
			return 0, l.err
		}
		if t, ok := l.types[elem]; ok {
			return t, nil
		}
		return 0, &fs.PathError{Op: "lookup", Path: p, Err: fs.ErrNotExist}
	case statted:
		if t.err != nil {
			return 0, t.err
		}
		return t.mode, nil
	}
	e := f.lstat(p)
	f.mu.Lock()
	f.types[p] = e
	f.mu.Unlock()
	return e.mode, e.err
}

// entryType is the remembered outcome of one lstat.
type entryType struct {
	mode fs.FileMode
	err  error
}

// join joins a canonical directory and one plain component without path.Join's cleaning,
// which the hot paths of a scan cannot afford and canonical paths do not need.
func join(dir, elem string) string {
	if dir == "." {
		return elem
	}
	return dir + "/" + elem
}

// step resolves the single component elem inside the canonical directory dir. joined is
// dir/elem when the caller has that string already, else empty.
func (f *FS) step(dir, elem, joined string, hops *int) (string, error) {
	switch elem {
	case ".":
		return dir, nil
	case "..":
		if dir == "." {
			return "", ErrOutsideRoot
		}
		return path.Dir(dir), nil
	}
	p := joined
	if p == "" {
		p = join(dir, elem)
	}
	t, err := f.lookupPath(dir, elem, p)
	if err != nil {
		return "", err
	}
	if t&fs.ModeSymlink == 0 {
		return p, nil
	}
	*hops++
	if *hops > MaxLinkHops {
		return "", ErrTooManyLinks
	}
	target, err := f.readLink(p)
	if err != nil {
		return "", err
	}
	if target == "" || strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("link %s -> %q: %w", p, target, ErrOutsideRoot)
	}
	cur := dir
	for e := range strings.SplitSeq(target, "/") {
		if e == "" {
			continue
		}
		if cur, err = f.step(cur, e, "", hops); err != nil {
			return "", err
		}
	}
	return cur, nil
}

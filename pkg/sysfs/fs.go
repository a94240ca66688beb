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
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
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

// lstat returns the type bits of the canonical path p. On disk it is one system call
// into a stack buffer; a scan makes thousands.
func (f *FS) lstat(p string) entryType {
	if f.dir == "" {
		info, err := f.fsys.Lstat(p)
		if err != nil {
			return entryType{err: err}
		}
		return entryType{mode: info.Mode().Type()}
	}
	mode, err := lstatMode(f.dir, p)
	if err != nil {
		return entryType{err: &fs.PathError{Op: "lstat", Path: p, Err: err}}
	}
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		return entryType{mode: fs.ModeDir}
	case syscall.S_IFLNK:
		return entryType{mode: fs.ModeSymlink}
	case syscall.S_IFREG:
		return entryType{}
	}
	return entryType{mode: fs.ModeIrregular}
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

// ReadString returns the content of the file name without its trailing newline.
func (f *FS) ReadString(name string) (string, error) {
	if f.dir != "" && fs.ValidPath(name) && name != "." {
		// Only the directory needs resolving: the file itself is opened with O_NOFOLLOW,
		// which fails (ELOOP) exactly when it is a link, and then takes the general path.
		dir, err := f.Resolve(path.Dir(name))
		if err != nil {
			return "", err
		}
		s, err := readFile(f.dir, dir, path.Base(name))
		if !errors.Is(err, syscall.ELOOP) {
			if err != nil {
				return "", &fs.PathError{Op: "read", Path: name, Err: err}
			}
			return s, nil
		}
	}
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

// maxFileSize bounds what readFile returns: a sysfs attribute is at most a page.
const maxFileSize = 64 << 10

// readFile reads the file root/dir/base without following a final link, in as few
// system calls as Linux allows: open, read until a short read, close. A short read is the
// end of the file for both kinds of file a root holds: a sysfs attribute returns its whole
// value in the first read, and a read of a regular local file stops short only at its end.
func readFile(root, dir, base string) (string, error) {
	fd, err := openNoFollow(root, dir, base)
	if err != nil {
		return "", err
	}
	defer func() { _ = syscall.Close(fd) }()
	var small [256]byte
	buf := small[:]
	n := 0
	for {
		m, err := syscall.Read(fd, buf[n:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		n += m
		if m == 0 || n < len(buf) {
			break
		}
		if len(buf) >= maxFileSize {
			return "", fmt.Errorf("larger than %d bytes", maxFileSize)
		}
		buf = append(buf, make([]byte, len(buf))...)
	}
	b := buf[:n]
	if n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	return string(b), nil
}

// pathBuf holds a NUL-terminated path for a system call. Paths of a scan are assembled
// in one on the stack rather than as strings, which a scan would allocate twice per call
// (once to join, once to convert for the kernel): thousands of calls per scan.
type pathBuf [512]byte

// set writes root/dir/base (dir "." and base "" are left out) and reports whether it fit
// and holds no NUL byte; callers fall back to the allocating calls, which refuse NUL bytes
// (EINVAL) and take long paths.
func (b *pathBuf) set(root, dir, base string) bool {
	n := len(root) + 1 + len(dir) + 1 + len(base)
	if n >= len(b) || strings.IndexByte(root, 0) >= 0 || strings.IndexByte(dir, 0) >= 0 || strings.IndexByte(base, 0) >= 0 {
		return false
	}
	i := copy(b[:], root)
	if dir != "." {
		b[i] = '/'
		i++
		i += copy(b[i:], dir)
	}
	if base != "" {
		b[i] = '/'
		i++
		i += copy(b[i:], base)
	}
	b[i] = 0
	return true
}

// cwd is AT_FDCWD as a variable: the negative constant does not convert to uintptr.
var cwd = unix.AT_FDCWD

// lstatMode returns the st_mode of root/p without following a final link (statx asks for
// the type only; the call exists on every Linux architecture, unlike newfstatat).
func lstatMode(root, p string) (uint32, error) {
	var buf pathBuf
	if !buf.set(root, p, "") {
		var st syscall.Stat_t
		if err := syscall.Lstat(root+"/"+p, &st); err != nil {
			return 0, err
		}
		return st.Mode, nil
	}
	var stx unix.Statx_t
	for {
		_, _, errno := syscall.Syscall6(unix.SYS_STATX, uintptr(cwd), uintptr(unsafe.Pointer(&buf[0])),
			uintptr(unix.AT_SYMLINK_NOFOLLOW|unix.AT_STATX_DONT_SYNC), uintptr(unix.STATX_TYPE), uintptr(unsafe.Pointer(&stx)), 0)
		switch errno {
		case 0:
			return uint32(stx.Mode), nil
		case syscall.EINTR:
			continue
		}
		return 0, errno
	}
}

// readLink returns the target of the link at the canonical path p: below the root on
// disk with readlinkat into stack buffers, through the fs.FS otherwise.
func (f *FS) readLink(p string) (string, error) {
	var buf pathBuf
	if f.dir == "" || !buf.set(f.dir, p, "") {
		return f.fsys.ReadLink(p)
	}
	var target [256]byte
	for {
		n, _, errno := syscall.Syscall6(unix.SYS_READLINKAT, uintptr(cwd), uintptr(unsafe.Pointer(&buf[0])),
			uintptr(unsafe.Pointer(&target[0])), uintptr(len(target)), 0, 0)
		switch {
		case errno == syscall.EINTR:
			continue
		case errno != 0:
			return "", &fs.PathError{Op: "readlink", Path: p, Err: errno}
		case int(n) == len(target):
			// Possibly truncated: let the general call size it.
			return f.fsys.ReadLink(p)
		}
		return string(target[:n]), nil
	}
}

// openNoFollow opens root/dir/base read-only with O_NOFOLLOW, the path assembled in a
// pathBuf.
func openNoFollow(root, dir, base string) (int, error) {
	var buf pathBuf
	if !buf.set(root, dir, base) {
		return syscall.Open(root+"/"+join(dir, base), syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW, 0)
	}
	for {
		fd, _, errno := syscall.Syscall6(syscall.SYS_OPENAT, uintptr(cwd), uintptr(unsafe.Pointer(&buf[0])),
			uintptr(syscall.O_RDONLY|syscall.O_CLOEXEC|syscall.O_NOFOLLOW), 0, 0, 0)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			return -1, errno
		}
		return int(fd), nil
	}
}

// ReadDirNames returns the sorted names of the entries of the directory name. The slice
// is the caller's.
func (f *FS) ReadDirNames(name string) ([]string, error) {
	p, err := f.Resolve(name)
	if err != nil {
		return nil, err
	}
	l := f.list(p)
	if l.err != nil {
		return nil, l.err
	}
	return slices.Clone(l.names), nil
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
	t, err := f.lookup(dir, path.Base(name))
	if err != nil {
		return "", err
	}
	if t&fs.ModeSymlink == 0 {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: errors.New("not a symbolic link")}
	}
	target, err := f.readLink(join(dir, path.Base(name)))
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
	if !fs.ValidPath(name) || name == "." {
		return name == "."
	}
	dir, err := f.Resolve(path.Dir(name))
	if err != nil {
		return false
	}
	_, err = f.lookup(dir, path.Base(name))
	return err == nil
}

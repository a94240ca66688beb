package sysfs

// The on-disk paths of an FS opened with Open: lstat, readlink and reads of attribute
// files as single system calls with their paths in stack buffers, the cost that dominates
// a scan.

import (
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

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
//
// That is why lstatMode, readLink and openNoFollow make the system calls with
// syscall.Syscall6 and unsafe pointers into a pathBuf rather than through the string-taking
// Statx, Readlinkat and Openat of golang.org/x/sys/unix. Measured with
// BenchmarkDiscoverProfile (pkg/discovery; 6 interleaved runs of each, benchstat, 2 shared
// CPUs), those wrappers make a scan of the large profile (320 ports) allocate 10.1 instead
// of 4.8 MiB (95k instead of 58k allocations) and cost 8.8% more CPU time (122 instead of
// 112 ms, p=0.04); on dgx-h100 (10 ports) the CPU time was within noise, the bytes doubled.
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

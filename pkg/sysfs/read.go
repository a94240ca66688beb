package sysfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
)

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

// ReadBytes returns the content of the binary file name as it is, without trimming a
// newline: the vpd of a PCI function. It reads until the end of the file (a binary
// attribute returns at most a page per read, so a short read is not the end) and refuses
// files larger than any sysfs attribute.
func (f *FS) ReadBytes(name string) ([]byte, error) {
	p, err := f.Resolve(name)
	if err != nil {
		return nil, err
	}
	file, err := f.fsys.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { _ = file.Close() }()
	b, err := io.ReadAll(io.LimitReader(file, maxFileSize+1))
	if err != nil {
		return nil, &fs.PathError{Op: "read", Path: name, Err: err}
	}
	if len(b) > maxFileSize {
		return nil, &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("larger than %d bytes", maxFileSize)}
	}
	return b, nil
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

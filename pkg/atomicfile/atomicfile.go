// Package atomicfile replaces a file's content so that a reader sees the old content or
// the new, never a mix, also after the writing process crashed half way.
//
// Nothing is fsynced unless the caller asks ([Sync]), on purpose. Every file the driver
// writes without it (the checkpoint, CDI specs, device metadata files) describes claims
// prepared during the current boot: the page cache keeps them through any crash of the
// process, and loses them only with the kernel, which means a reboot, after which the
// kubelet prepares the claims again and the files are written again. An fsync of the file
// and its directory would cost a journal commit per prepare (0.3 ms on a quiet virtual
// disk, milliseconds on a busy node's disk) and buy nothing. docs/kubelet-plugin.md ("What
// is written to disk, and why nothing is fsynced") has the whole argument.
//
// For the same reason a file is not renamed over the old one but exchanged with it
// (renameat2 RENAME_EXCHANGE), and the old one, now under the temporary name, unlinked.
// ext4 treats a rename over an existing file as "replace via rename" (its auto_da_alloc
// heuristic, made for programs that forget to fsync) and starts writing the new file's
// data to disk at once; an exchange is not a replace, so the data stays in the page cache
// until normal writeback, and a version replaced before then (the checkpoint of a busy
// node changes several times a second) is never written at all. Readers see no
// difference: either call switches the name to the new file in one step. With [Spare]
// the old file is not even unlinked but written again by the next write.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Option changes how a write is made; the defaults are the package comment's: no fsync,
// no check, a new temporary file for every write.
type Option func(*options)

type options struct {
	sync  bool
	spare string
	check func(tmp string) error
}

// Sync makes the write durable: the temporary file is fsynced before it takes the name's
// place and the directory after, so that the new content survives a power loss once the
// call has returned. For files that must outlive a reboot (the hook binary installed on
// the host), not for the driver's state of the current boot (see the package comment).
func Sync() Option { return func(o *options) { o.sync = true } }

// Check runs check on the temporary file, written whole, closed and with its final mode,
// before it takes the name's place; an error from check fails the write and is returned
// as it is (the caller's own words about its own content), and the name is left as it
// was. For files whose readers must never see content they would refuse (a CDI spec).
func Check(check func(tmp string) error) Option {
	return func(o *options) { o.check = check }
}

// Spare makes writes reuse one file rather than create a temporary file each time: the
// file that the new content replaced stays at spare, a path in the same directory, and
// the next write with the same spare writes into it, cuts it to the new length and
// exchanges it with the current file again. Creating and unlinking a file costs the file
// system an inode allocated and freed and a directory entry added and removed on every
// write; on ext4 that was most of the cost of a checkpoint save (docs/kubelet-plugin.md,
// "Why nothing is fsynced"). Where the file system cannot exchange, the write renames as
// without Spare, and the next one creates the spare again.
//
// Only for a file whose readers and writers all hold one lock around each read and each
// write, as the plugin's checkpoint does: the replaced file is rewritten in place by the
// next write, so a reader that kept it open past the lock would see it change (without
// Spare it keeps the old content), and two writers at once would write into the same
// spare. The spare is no temporary file ([IsTemp] does not know it): it stays, and its
// content means nothing. A crash during a write leaves the name as it was and the spare
// half written, which the next write rewrites whole. Something else than a regular file
// at spare is left alone; the write then makes a temporary file as without Spare.
func Spare(spare string) Option { return func(o *options) { o.spare = spare } }

// WriteFile writes data to name with mode perm (the umask does not apply): into a
// temporary file in the same directory, hidden and ending in .tmp so that directory scans
// (the container runtime's CDI watcher) skip it, which then takes name's place (see the
// package comment). On an error the temporary file is removed and name is left as it
// was, except after [Sync]'s fsync of the directory failed: then name has the new
// content, which may not survive a power loss.
func WriteFile(name string, data []byte, perm os.FileMode, opts ...Option) error {
	return Write(name, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	}, opts...)
}

// Write is [WriteFile] with the content written by write, for content that is streamed
// rather than held in memory (an image archive). An error from write fails the write,
// wrapped, and leaves name as it was.
func Write(name string, perm os.FileMode, write func(io.Writer) error, opts ...Option) (err error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	if o.spare != "" && filepath.Dir(o.spare) != filepath.Dir(name) {
		return fmt.Errorf("write %s: spare %s is not in its directory", name, o.spare)
	}
	tmp, err := openTemp(dir, base, o.spare)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = unix.Unlink(tmp.name)
		}
	}()
	err = write(tmp)
	if err == nil {
		err = tmp.finish(perm, o.sync)
	}
	err = errors.Join(err, tmp.close())
	if err == nil && o.check != nil {
		if checkErr := o.check(tmp.name); checkErr != nil {
			return checkErr
		}
	}
	if err == nil {
		err = replace(tmp.name, name, tmp.spare)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if o.sync {
		// The name is the new file's from here on: an error no longer removes it.
		if serr := syncDir(dir); serr != nil {
			return fmt.Errorf("write %s: %w", name, serr)
		}
	}
	return nil
}

// tempFile is an open temporary file, written with plain write(2) calls. It is opened
// with open(2) itself rather than os.OpenFile, which offers every file to the runtime's
// poller and, for a regular file, takes that back again: five fcntl and epoll_ctl calls
// per file for nothing.
type tempFile struct {
	fd   int
	name string
	// spare is set for the file of [Spare], which stays after the exchange;
	// spareSize and spareMode are what it had when it was opened.
	spare     bool
	spareSize int64
	spareMode uint32
	// size is how much has been written.
	size int64
}

// openTemp opens the file that a write to dir/base writes into: the spare (created if
// missing) when one is given, otherwise a new temporary file of a random name. Something
// else than a regular file at the spare's path makes it fall back to a new file.
func openTemp(dir, base, spare string) (*tempFile, error) {
	if spare != "" {
		fd, err := open(spare, unix.O_WRONLY|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_CLOEXEC)
		if err == nil {
			var st unix.Stat_t
			if err := unix.Fstat(fd, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
				return &tempFile{fd: fd, name: spare, spare: true, spareSize: st.Size, spareMode: st.Mode & 0o7777}, nil
			}
			_ = unix.Close(fd)
		}
	}
	for range 10000 {
		name := filepath.Join(dir, TempPrefix(base)+strconv.FormatUint(uint64(rand.Uint32()), 10)+tempSuffix)
		fd, err := open(name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC)
		if errors.Is(err, unix.EEXIST) {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "create", Path: name, Err: err}
		}
		return &tempFile{fd: fd, name: name}, nil
	}
	return nil, &os.PathError{Op: "create", Path: filepath.Join(dir, TempPrefix(base)+"*"+tempSuffix), Err: unix.EEXIST}
}

// open opens name with mode 0600 (the umask applies; finish sets the mode).
func open(name string, flags int) (int, error) {
	for {
		fd, err := unix.Open(name, flags, 0o600)
		if !errors.Is(err, unix.EINTR) {
			return fd, err
		}
	}
}

// Write implements io.Writer.
func (f *tempFile) Write(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := unix.Write(f.fd, p[n:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err == nil && m == 0 {
			err = io.ErrShortWrite
		}
		if err != nil {
			f.size += int64(n)
			return n, &os.PathError{Op: "write", Path: f.name, Err: err}
		}
		n += m
	}
	f.size += int64(n)
	return n, nil
}

// finish gives the written file its length (a spare may have been longer), its mode and,
// with sync, makes its content durable.
func (f *tempFile) finish(perm os.FileMode, sync bool) error {
	if f.spare && f.spareSize > f.size {
		if err := ignoringEINTR(func() error { return unix.Ftruncate(f.fd, f.size) }); err != nil {
			return &os.PathError{Op: "truncate", Path: f.name, Err: err}
		}
	}
	// A new file was made 0600 whatever perm and the umask say; a spare has the mode of
	// the file it was before.
	if (!f.spare && perm != 0o600) || (f.spare && f.spareMode != uint32(perm.Perm())) {
		if err := ignoringEINTR(func() error { return unix.Fchmod(f.fd, uint32(perm.Perm())) }); err != nil {
			return &os.PathError{Op: "chmod", Path: f.name, Err: err}
		}
	}
	if sync {
		if err := ignoringEINTR(func() error { return unix.Fsync(f.fd) }); err != nil {
			return &os.PathError{Op: "sync", Path: f.name, Err: err}
		}
	}
	return nil
}

func (f *tempFile) close() error {
	if err := unix.Close(f.fd); err != nil {
		return &os.PathError{Op: "close", Path: f.name, Err: err}
	}
	return nil
}

func ignoringEINTR(fn func() error) error {
	for {
		err := fn()
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// syncDir fsyncs the directory dir, which makes the renames and unlinks in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	return errors.Join(d.Sync(), d.Close())
}

// tempSuffix ends the names of temporary files.
const tempSuffix = ".tmp"

// TempPrefix is how the names of base's temporary files start; they end in ".tmp". A
// temporary file outlives its write only if the process died during it.
func TempPrefix(base string) string { return "." + base + "." }

// IsTemp reports whether name, an entry of a directory, is a temporary file of a write
// to base in the same directory: what a crash during the write leaves behind, for the
// owner of base to remove.
func IsTemp(base, name string) bool {
	return strings.HasPrefix(name, TempPrefix(base)) && strings.HasSuffix(name, tempSuffix)
}

// replace puts the file tmp in dst's place: exchanged with a regular file (or a
// symlink) that is there, renamed otherwise, and by a rename also where the file system
// cannot exchange. A directory at dst is left to the rename, which refuses it. After an
// exchange the old file, now at tmp, is unlinked unless keep is set (the spare).
func replace(tmp, dst string, keep bool) error {
	var st unix.Stat_t
	if err := unix.Lstat(dst, &st); err != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return rename(tmp, dst)
	}
	err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
	switch {
	case errors.Is(err, unix.EINVAL), errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EOPNOTSUPP):
		// A file system (or kernel) without exchange.
		return rename(tmp, dst)
	case errors.Is(err, unix.ENOENT):
		// dst went away since the Lstat.
		return rename(tmp, dst)
	case err != nil:
		return &os.LinkError{Op: "renameat2", Old: tmp, New: dst, Err: err}
	}
	if keep {
		return nil
	}
	// The new content is in place, which is what the caller asked for; the old file,
	// now under the temporary name, goes. Should that fail, a hidden leftover that the
	// owner's cleanup of temporary files removes is no reason to report a failed write.
	_ = unix.Unlink(tmp)
	return nil
}

// rename is os.Rename without its second lstat of dst (replace has made its own).
func rename(oldpath, newpath string) error {
	if err := unix.Rename(oldpath, newpath); err != nil {
		return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
	}
	return nil
}

package plugin

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// Where the device metadata files live (docs/device-metadata.md, "Where the files are").
//
// The kubelet plugin helper writes a claim's metadata under
// {DataDir}/dra-device-metadata/{namespace}_{name}/ and names that path in the CDI spec
// that mounts it; the runtime resolves the path on the host when it bind-mounts it. The
// data directory is on the node's disk (it holds the checkpoint, which must survive a
// plugin restart), and there every prepare created two directories and a file and every
// unprepare removed them again: the most expensive file operations of a prepare
// (docs/device-metadata.md, "What it costs"). The files are of no use after a reboot,
// like the CDI specs on /var/run that mount them, so with a metadata directory
// configured, {DataDir}/dra-device-metadata is a symbolic link to it, on a tmpfs.

// placeMetadata makes {dataDir}/dra-device-metadata what the configuration asks for: a
// symbolic link to runDir (created if missing), or a directory of its own when runDir is
// empty. A previous placement (a directory written by an earlier version, or a link to
// another directory) is swapped for the new one in one step, and the files it holds are
// copied over, so that the containers of running pods that restart still find the
// metadata of their claims. What a crash in the middle leaves under the temporary names
// is finished on the next start.
func placeMetadata(dataDir, runDir string) error {
	p := metadataPlacement{
		link:   filepath.Join(dataDir, metadataSubDir),
		next:   filepath.Join(dataDir, atomicfile.TempPrefix(metadataSubDir)+"next"),
		old:    filepath.Join(dataDir, atomicfile.TempPrefix(metadataSubDir)+"old"),
		runDir: runDir,
	}
	if runDir != "" {
		if err := os.MkdirAll(runDir, 0o755); err != nil {
			return fmt.Errorf("create device metadata directory: %w", err)
		}
	}
	// Something else than a directory or a link in the way stays, with an error.
	if _, err := p.placed(); err != nil {
		return err
	}
	if err := p.recover(); err != nil {
		return fmt.Errorf("device metadata: %w", err)
	}
	done, err := p.placed()
	if done || err != nil {
		return err
	}
	// The new placement is made next to the old one and put in its place at once.
	if runDir == "" {
		err = os.Mkdir(p.next, 0o755)
	} else {
		err = os.Symlink(runDir, p.next)
	}
	if err != nil {
		return fmt.Errorf("device metadata: %w", err)
	}
	if _, err := os.Lstat(p.link); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(p.next, p.link); err != nil {
			return fmt.Errorf("device metadata: %w", err)
		}
		return nil
	}
	if err := swap(p.next, p.link, p.old); err != nil {
		return fmt.Errorf("device metadata: put %s in place of %s: %w", p.next, p.link, err)
	}
	// The previous placement is now at next (or old, where the file system could not
	// exchange): its files go to the new one.
	if err := p.recover(); err != nil {
		return fmt.Errorf("device metadata: %w", err)
	}
	return nil
}

// metadataPlacement names the paths placeMetadata works with.
type metadataPlacement struct {
	link, next, old, runDir string
}

// placed says whether link is what the configuration asks for; an error when something
// else than a directory or a link is in its way.
func (p metadataPlacement) placed() (bool, error) {
	st, err := os.Lstat(p.link)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("device metadata: %w", err)
	case st.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p.link)
		return err == nil && p.runDir != "" && target == p.runDir, nil
	case st.IsDir():
		return p.runDir == "", nil
	}
	return false, fmt.Errorf("device metadata: %s is neither a directory nor a symbolic link (%s)", p.link, st.Mode().Type())
}

// recover finishes what an earlier placement left under the temporary names: a previous
// placement whose files go to link, or a new one that never got into place.
func (p metadataPlacement) recover() error {
	if _, err := os.Lstat(p.link); errors.Is(err, fs.ErrNotExist) {
		// Between the two renames of swap's fallback: old is the previous placement.
		if _, err := os.Lstat(p.old); err == nil {
			if err := os.Rename(p.old, p.link); err != nil {
				return err
			}
		}
	}
	_, err := os.Lstat(p.link)
	linked := err == nil
	for _, prev := range []string{p.next, p.old} {
		if _, err := os.Lstat(prev); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if linked {
			if err := p.adopt(prev); err != nil {
				return err
			}
		}
		// Without link, prev is a new placement that never got there: nothing in it.
		if err := os.RemoveAll(prev); err != nil {
			return err
		}
	}
	return nil
}

// adopt copies the files of the placement prev (a directory, or a link to one) to link,
// unless both are the same directory, and empties the directory a link named, which is
// not the data directory's.
func (p metadataPlacement) adopt(prev string) error {
	from := resolve(prev)
	if filepath.Clean(from) == filepath.Clean(resolve(p.link)) {
		return nil
	}
	if err := copyMetadata(from, p.link); err != nil {
		return fmt.Errorf("copy the files of %s: %w", from, err)
	}
	if from != prev && filepath.Clean(from) != filepath.Clean(p.runDir) {
		return clearDir(from)
	}
	return nil
}

// resolve is the directory path names: the target of a link, or path itself.
func resolve(path string) string {
	target, err := os.Readlink(path)
	if err != nil {
		return path
	}
	if !filepath.IsAbs(target) {
		target = filepath.Join(filepath.Dir(path), target)
	}
	return target
}

// swap puts next in dst's place: exchanged with it where the file system can, so that
// dst names either placement at every moment; elsewhere dst is first renamed to old.
func swap(next, dst, old string) error {
	err := unix.Renameat2(unix.AT_FDCWD, next, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) && !errors.Is(err, unix.EOPNOTSUPP) {
		return err
	}
	if err := os.Rename(dst, old); err != nil {
		return err
	}
	return os.Rename(next, dst)
}

// copyMetadata copies the directories and regular files under from to the same paths
// under to, keeping any file that is there already (the newer one: written through the
// new placement since the swap). Anything else (links, devices) is not metadata and is
// left out.
func copyMetadata(from, to string) error {
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil || strings.HasPrefix(rel, "..") {
			return fmt.Errorf("%s is not under %s", path, from)
		}
		dst := filepath.Join(to, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(dst, 0o755)
		case d.Type().IsRegular():
			if _, err := os.Lstat(dst); err == nil {
				return nil
			}
			data, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			if err != nil {
				return err
			}
			return atomicfile.WriteFile(dst, data, 0o644)
		}
		return nil
	})
}

// clearDir removes everything in dir and keeps dir itself (a mount point, in the chart).
func clearDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

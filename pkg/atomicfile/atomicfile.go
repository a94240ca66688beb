// Package atomicfile replaces a file's content so that a reader sees the old content or
// the new, never a mix, also after the writing process crashed half way.
//
// Nothing is fsynced, on purpose. Every file the driver writes this way (device metadata
// files, the CDI specs that mount them) describes claims prepared during the current boot:
// the page cache keeps them through any crash of the process, and loses them only with the
// kernel, which means a reboot, after which the kubelet prepares the claims again and the
// files are written again. An fsync of the file and its directory would cost a journal
// commit per prepare (0.3 ms on a quiet virtual disk, milliseconds on a busy node's disk)
// and buy nothing. docs/kubelet-plugin.md ("What is written to disk, and why nothing is
// fsynced") has the whole argument.
package atomicfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// WriteFile writes data to name with mode perm (the umask does not apply): into a
// temporary file in the same directory, hidden and ending in .tmp so that directory scans
// (the container runtime's CDI watcher) skip it, which is then renamed over name. On an
// error the temporary file is removed and name is left as it was.
func WriteFile(name string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(name)
	if dir == "" {
		dir = "."
	}
	tmp, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Chmod(perm) // CreateTemp makes 0600 whatever perm and the umask say
	}
	err = errors.Join(err, tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), name)
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

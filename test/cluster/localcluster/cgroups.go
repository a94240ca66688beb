package localcluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kubepodsCgroups returns the kubelet's pod cgroup trees: kubepods (cgroupfs driver) or
// kubepods.slice (systemd driver), under every v1 hierarchy and under the v2 root.
func kubepodsCgroups() []string {
	var roots []string
	candidates := []string{"/sys/fs/cgroup"}
	if entries, err := os.ReadDir("/sys/fs/cgroup"); err == nil {
		for _, e := range entries {
			if e.IsDir() {
				candidates = append(candidates, filepath.Join("/sys/fs/cgroup", e.Name()))
			}
		}
	}
	for _, c := range candidates {
		for _, n := range []string{"kubepods", "kubepods.slice"} {
			if fi, err := os.Stat(filepath.Join(c, n)); err == nil && fi.IsDir() {
				roots = append(roots, filepath.Join(c, n))
			}
		}
	}
	return roots
}

// removePodCgroups kills processes left in the kubelet's pod cgroups (containers whose shim
// is gone) and removes the cgroups, deepest first, so the next kubelet starts clean.
func removePodCgroups() error {
	var dirs []string
	for _, root := range kubepodsCgroups() {
		_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	killed := false
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				killed = true
			}
		}
	}
	if killed {
		time.Sleep(500 * time.Millisecond)
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

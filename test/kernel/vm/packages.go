// Package vm builds the real-kernel test VM from pinned Debian packages and boots it
// under QEMU: a Debian kernel with its RDMA modules, a busybox initramfs with rdma-core's
// and iproute2's tools and their libraries, and the project's static binaries. The VM has
// no network device and no disk; tests report on a second serial port.
package vm

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// Package is one pinned Debian package.
type Package struct {
	Name, Version string
}

// debianName matches a Debian package name (Debian policy 5.6.1).
var debianName = regexp.MustCompile(`^[a-z0-9][a-z0-9+.-]+$`)

// debianVersion matches a Debian version: [epoch:]upstream[-revision].
var debianVersion = regexp.MustCompile(`^([0-9]+:)?[0-9][A-Za-z0-9.+~:-]*$`)

// ParseLock reads a lock file: one "name version" per line, # comments and blank lines
// ignored. Errors name the file and line.
func ParseLock(name string, data []byte) ([]Package, error) {
	var pkgs []Package
	seen := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"name version\", got %q", name, n, line)
		}
		if !debianName.MatchString(f[0]) {
			return nil, fmt.Errorf("%s:%d: %q is not a Debian package name", name, n, f[0])
		}
		if !debianVersion.MatchString(f[1]) {
			return nil, fmt.Errorf("%s:%d: %q is not a Debian version", name, n, f[1])
		}
		if prev, ok := seen[f[0]]; ok {
			return nil, fmt.Errorf("%s:%d: %s is pinned already on line %d", name, n, f[0], prev)
		}
		seen[f[0]] = n
		pkgs = append(pkgs, Package{Name: f[0], Version: f[1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("%s: no packages", name)
	}
	return pkgs, nil
}

// LockKey identifies a set of packages, for the cache directories built from them.
func LockKey(pkgs []Package) string {
	h := sha256.New()
	for _, p := range pkgs {
		fmt.Fprintf(h, "%s=%s\n", p.Name, p.Version)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// Fetch downloads the packages that are not in cache/debs yet with one apt-get call and
// returns the .deb files in the packages' order (apt's file names, name_version_arch.deb,
// with the epoch's colon as %3a). The machine's apt sources must have the versions
// (apt-get update first); a version no longer in the archive is reported with the command
// that pins the current ones.
func Fetch(ctx context.Context, cache string, pkgs []Package, logf func(string, ...any)) ([]string, error) {
	for _, tool := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("the real-kernel VM is built from Debian packages and needs %s (Debian or Ubuntu): %w", tool, err)
		}
	}
	dir := filepath.Join(cache, "debs")
	find := func(d string, p Package) (string, error) {
		prefix := p.Name + "_" + strings.ReplaceAll(p.Version, ":", "%3a") + "_"
		m, err := filepath.Glob(filepath.Join(d, prefix+"*.deb"))
		if err != nil || len(m) != 1 {
			return "", fmt.Errorf("%s: want one %s*.deb, found %d", d, prefix, len(m))
		}
		return m[0], nil
	}
	var missing []Package
	for _, p := range pkgs {
		if _, err := find(dir, p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		// Downloads land in a directory of their own and move into the cache whole, so
		// that an interrupted download never passes for a cached package.
		tmp := filepath.Join(cache, "debs.part")
		if err := os.RemoveAll(tmp); err != nil {
			return nil, err
		}
		for _, d := range []string{tmp, dir} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				return nil, err
			}
		}
		args := []string{"download", "-q", "-o", "APT::Sandbox::User=root"}
		for _, p := range missing {
			args = append(args, p.Name+"="+p.Version)
		}
		logf("downloading %d packages", len(missing))
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Dir = tmp
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("download the VM's packages: %w: %s\n(if the archive has moved on, pin its current versions with make e2e-kernel-lock)",
				err, bytes.TrimSpace(out))
		}
		for _, p := range missing {
			deb, err := find(tmp, p)
			if err != nil {
				return nil, fmt.Errorf("download %s %s: %w", p.Name, p.Version, err)
			}
			if err := os.Rename(deb, filepath.Join(dir, filepath.Base(deb))); err != nil {
				return nil, err
			}
		}
		if err := os.RemoveAll(tmp); err != nil {
			return nil, err
		}
	}
	debs := make([]string, 0, len(pkgs))
	for _, p := range pkgs {
		deb, err := find(dir, p)
		if err != nil {
			return nil, err
		}
		debs = append(debs, deb)
	}
	return debs, nil
}

// Extract unpacks the packages into one tree, cache/root-<key>, reused while it is
// complete (a marker file is written last).
func Extract(ctx context.Context, cache, key string, debs []string) (string, error) {
	root := filepath.Join(cache, "root-"+key)
	marker := filepath.Join(root, ".complete")
	if _, err := os.Stat(marker); err == nil {
		return root, nil
	}
	if err := os.RemoveAll(root); err != nil {
		return "", err
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return "", err
	}
	for _, deb := range debs {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", deb, root).CombinedOutput(); err != nil {
			return "", fmt.Errorf("extract %s: %w: %s", deb, err, bytes.TrimSpace(out))
		}
	}
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		return "", err
	}
	return root, nil
}

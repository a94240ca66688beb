package vm

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/cavaliergopher/cpio"
)

// ImageSpec says what goes into the VM's initramfs.
type ImageSpec struct {
	// Root is the tree the pinned packages were extracted into.
	Root string
	// Programs are ELF files (root-relative) copied with the libraries they link.
	Programs []string
	// Static are statically linked executables (root-relative), copied alone.
	Static []string
	// Files are root-relative files copied as they are (configuration, scripts).
	Files []string
	// Modules are the kernel modules loaded at boot; their dependencies come first.
	Modules []string
	// Host maps an image path to a file on the host, e.g. the project's static binaries.
	Host map[string]string
	// Init is the /init script.
	Init string
}

// Image is a bootable kernel and initramfs.
type Image struct {
	Kernel, Initramfs string
	// Release is the kernel release; LoadOrder the modules /init loads, in order.
	Release   string
	LoadOrder []string
}

// loaderPath is where programs look for the dynamic loader (their PT_INTERP).
const loaderPath = "/lib64/ld-linux-x86-64.so.2"

// libDirs are the multiarch library directories, root-relative.
var libDirs = []string{"lib/x86_64-linux-gnu", "usr/lib/x86_64-linux-gnu"}

// entry is one file of the image: its content comes from a host file, or data.
type entry struct {
	src  string
	data []byte
	mode cpio.FileMode
}

// Build writes the initramfs of spec to out (a directory) and returns the image.
func Build(ctx context.Context, spec ImageSpec, out string) (*Image, error) {
	mods, err := OpenModules(spec.Root)
	if err != nil {
		return nil, err
	}
	kernel := filepath.Join(spec.Root, "boot", "vmlinuz-"+mods.Release)
	if _, err := os.Stat(kernel); err != nil {
		return nil, fmt.Errorf("kernel image: %w", err)
	}
	order, err := mods.LoadOrder(spec.Modules)
	if err != nil {
		return nil, err
	}
	files := map[string]entry{}
	add := func(imgPath string, e entry) { files[path.Clean("/"+imgPath)] = e }

	var list strings.Builder
	for _, name := range order {
		rel, _ := mods.Path(name)
		add("/lib/modules/"+rel, entry{src: filepath.Join(mods.dir, rel), mode: 0o644})
		fmt.Fprintf(&list, "%s\n", rel)
	}
	add("/etc/modules.load", entry{data: []byte(list.String()), mode: 0o644})

	loader, err := findLoader(spec.Root)
	if err != nil {
		return nil, err
	}
	add(loaderPath, entry{src: loader, mode: 0o755})
	for _, prog := range spec.Programs {
		add(prog, entry{src: filepath.Join(spec.Root, prog), mode: 0o755})
		libs, err := libraries(ctx, loader, spec.Root, prog)
		if err != nil {
			return nil, err
		}
		for _, lib := range libs {
			add(lib, entry{src: filepath.Join(spec.Root, lib), mode: 0o755})
		}
	}
	for _, f := range spec.Static {
		add(f, entry{src: filepath.Join(spec.Root, f), mode: 0o755})
	}
	for _, f := range spec.Files {
		add(f, entry{src: filepath.Join(spec.Root, f), mode: 0o644})
	}
	for imgPath, src := range spec.Host {
		add(imgPath, entry{src: src, mode: 0o755})
	}
	add("/init", entry{data: []byte(spec.Init), mode: 0o755})

	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	initramfs := filepath.Join(out, "initramfs.cpio")
	if err := writeCPIO(initramfs, files); err != nil {
		return nil, err
	}
	return &Image{Kernel: kernel, Initramfs: initramfs, Release: mods.Release, LoadOrder: order}, nil
}

// findLoader returns the dynamic loader of the extracted libc6.
func findLoader(root string) (string, error) {
	for _, dir := range libDirs {
		p := filepath.Join(root, dir, "ld-linux-x86-64.so.2")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no ld-linux-x86-64.so.2 below %s: is libc6 in the lock file?", root)
}

// libraries lists the root-relative libraries prog loads, as the extracted loader
// resolves them against the extracted tree alone.
func libraries(ctx context.Context, loader, root, prog string) ([]string, error) {
	var paths []string
	for _, d := range libDirs {
		paths = append(paths, filepath.Join(root, d))
	}
	cmd := exec.CommandContext(ctx, loader, "--inhibit-cache", "--library-path", strings.Join(paths, ":"), "--list", filepath.Join(root, prog))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("libraries of %s: %w: %s", prog, err, bytes.TrimSpace(out))
	}
	return parseLoaderList(root, prog, out)
}

// parseLoaderList reads `ld.so --list` output: the libraries resolved below root,
// root-relative. A library not found, or found outside root (on the host), is an error:
// the image holds only what the pinned packages hold.
func parseLoaderList(root, prog string, out []byte) ([]string, error) {
	var libs []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		name, target, ok := strings.Cut(line, " => ")
		if !ok {
			continue // the vDSO and the loader itself
		}
		target, _, _ = strings.Cut(target, " (")
		if path.IsAbs(name) {
			continue // the loader, as libc names it: Build puts it at loaderPath
		}
		if target == "not found" {
			return nil, fmt.Errorf("%s needs %s, which no pinned package has: add its package to the lock file", prog, name)
		}
		rel, err := filepath.Rel(root, target)
		if err != nil || strings.HasPrefix(rel, "..") {
			return nil, fmt.Errorf("%s needs %s, found only on the host (%s): add its package to the lock file", prog, name, target)
		}
		// The soname's path: the file the loader opens at run time.
		libs = append(libs, filepath.Join(filepath.Dir(rel), name))
	}
	return libs, sc.Err()
}

// writeCPIO writes files as a newc archive, every parent directory first, in path order.
func writeCPIO(name string, files map[string]entry) error {
	dirs := map[string]bool{}
	for p := range files {
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	w := cpio.NewWriter(bw)
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if err := w.WriteHeader(&cpio.Header{Name: strings.TrimPrefix(d, "/"), Mode: cpio.TypeDir | 0o755}); err != nil {
			f.Close()
			return err
		}
	}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := writeEntry(w, p, files[p]); err != nil {
			f.Close()
			return fmt.Errorf("initramfs %s: %w", p, err)
		}
	}
	if err := w.Close(); err != nil {
		f.Close()
		return err
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// writeEntry writes one regular file, streaming it from its source: the test binary alone
// is tens of megabytes.
func writeEntry(w *cpio.Writer, p string, e entry) error {
	hdr := &cpio.Header{Name: strings.TrimPrefix(p, "/"), Mode: cpio.TypeReg | e.mode, Size: int64(len(e.data))}
	if e.data != nil {
		if err := w.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := w.Write(e.data)
		return err
	}
	// Open follows symbolic links: a soname link becomes the library itself.
	src, err := os.Open(e.src)
	if err != nil {
		return err
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return err
	}
	hdr.Size = st.Size()
	if err := w.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = io.Copy(w, src)
	return err
}

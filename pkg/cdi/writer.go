package cdi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	cdiapi "tags.cncf.io/container-device-interface/pkg/cdi"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// specPerm lets the runtime (and an operator) read the spec; only the plugin writes.
const specPerm = 0o644

// Writer writes, removes and lists the claims' spec files in one directory.
//
// Calls for different claims may run concurrently; calls for the same claim must not
// (the plugin serializes the work on one claim).
type Writer struct {
	opts Options
	// prefix is what SpecFileName puts before the claim UID for this driver.
	prefix string
}

// NewWriter returns a Writer with opts, defaults filled in.
func NewWriter(opts Options) *Writer {
	opts = opts.withDefaults()
	return &Writer{opts: opts, prefix: strings.TrimSuffix(SpecFileName(opts.DriverName, "x"), "x.json")}
}

// SpecFileName is the base name of a claim's spec file of the driver driverName, made by
// the CDI library's transient naming helper so that it cannot clash with another vendor's
// files, another installation's (see Vendor) included.
func SpecFileName(driverName, claimUID string) string {
	return cdiapi.GenerateTransientSpecName(Vendor(driverName), Class, claimUID) + ".json"
}

// Exists reports whether the claim's spec file is there, with one stat: prepare uses it
// to tell a completed entry whose spec was removed behind its back.
func (w *Writer) Exists(claimUID string) (bool, error) {
	_, err := os.Stat(filepath.Join(w.opts.SpecDir, SpecFileName(w.opts.DriverName, claimUID)))
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("stat CDI spec: %w", err)
	}
}

// Write builds the claim's spec, validates it with the CDI library and writes it
// atomically; it returns the CDI device IDs of each device, in the order of devices.
// Writing the same claim again replaces the file, and leaves it untouched when the
// content is the same, so that a retried prepare does not wake the runtime's watcher.
func (w *Writer) Write(ctx context.Context, claimUID string, devices []ClaimDevice) ([][]string, error) {
	spec, ids, err := BuildSpec(ctx, claimUID, devices, w.opts)
	if err != nil {
		return nil, fmt.Errorf("build CDI spec: %w", err)
	}
	data, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode CDI spec: %w", err)
	}
	data = append(data, '\n')
	name := SpecFileName(w.opts.DriverName, claimUID)
	path := filepath.Join(w.opts.SpecDir, name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		logger(ctx).V(4).Info("CDI spec is up to date", "claim", claimUID, "path", path)
		return ids, nil
	}
	if err := writeSpecFile(w.opts.SpecDir, name, data); err != nil {
		return nil, err
	}
	logger(ctx).V(2).Info("Wrote CDI spec", "claim", claimUID, "path", path, "devices", len(spec.Devices))
	return ids, nil
}

// writeSpecFile writes data as dir/name so that a reader (the container runtime's
// watcher) sees the old file or the whole new one, also after the plugin crashed
// (atomicfile: a hidden temporary file, without a .json/.yaml extension so that the
// runtime's scan skips it, which then takes the name). The temporary file is validated by
// the CDI library's own loader first, so a spec the runtime would refuse never appears
// under its real name.
//
// Nothing is fsynced: the spec directory is /var/run/cdi, a tmpfs on real nodes (where
// fsync does nothing), and wherever it is not, losing the page cache means a kernel crash
// or a power loss, so a reboot, after which the pods are gone and the plugin drops the
// specs of the earlier boot (docs/kubelet-plugin.md, "Why nothing is fsynced").
//
// The library's Cache.WriteSpec is not used: it leaves the file 0600.
func writeSpecFile(dir, name string, data []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create CDI spec dir: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), data, specPerm, atomicfile.Check(func(tmp string) error {
		if _, err := cdiapi.ReadSpec(tmp, 0); err != nil {
			return fmt.Errorf("validate CDI spec: %w", err)
		}
		return nil
	}))
}

// Remove removes the claim's spec file and any temporary file a crash left behind. A
// claim without a spec is not an error.
func (w *Writer) Remove(ctx context.Context, claimUID string) error {
	if err := ValidateClaimUID(claimUID); err != nil {
		return err
	}
	name := SpecFileName(w.opts.DriverName, claimUID)
	paths := []string{filepath.Join(w.opts.SpecDir, name)}
	// Temporary files of this claim that a crash left behind (see writeSpecFile).
	entries, _ := os.ReadDir(w.opts.SpecDir)
	for _, e := range entries {
		if atomicfile.IsTemp(name, e.Name()) {
			paths = append(paths, filepath.Join(w.opts.SpecDir, e.Name()))
		}
	}
	// The topology file goes first: the spec that mounts it is what Cleanup finds.
	removed, err := w.removeTopology(claimUID)
	if err != nil {
		return err
	}
	for _, p := range paths {
		err := os.Remove(p)
		switch {
		case err == nil:
			removed = true
		case errors.Is(err, fs.ErrNotExist):
		default:
			return fmt.Errorf("remove CDI spec: %w", err)
		}
	}
	if removed {
		logger(ctx).V(2).Info("Removed CDI spec", "claim", claimUID)
	}
	return nil
}

// List returns the UIDs of the claims that have a spec file, sorted. Files of other
// vendors (other installations of this driver included) and names that do not carry a valid claim UID are ignored; a missing
// directory holds no specs.
func (w *Writer) List() ([]string, error) {
	entries, err := os.ReadDir(w.opts.SpecDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list CDI specs: %w", err)
	}
	var uids []string
	for _, e := range entries {
		uid, ok := strings.CutPrefix(e.Name(), w.prefix)
		if !ok || e.IsDir() {
			continue
		}
		uid, ok = strings.CutSuffix(uid, ".json")
		if ok && ValidateClaimUID(uid) == nil {
			uids = append(uids, uid)
		}
	}
	sort.Strings(uids)
	return uids, nil
}

package cdi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

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
	// accepted holds the specs that the CDI library accepted, by specKey.
	accepted acceptedSpecs
	// validate checks a written temporary spec file: validateSpecFile (tests count it).
	validate func(tmp string) error
}

// NewWriter returns a Writer with opts, defaults filled in.
func NewWriter(opts Options) *Writer {
	opts = opts.withDefaults()
	return &Writer{opts: opts, prefix: strings.TrimSuffix(SpecFileName(opts.DriverName, "x"), "x.json"), validate: validateSpecFile}
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

// Write builds the claim's spec, validates it with the CDI library (unless the library
// accepted the same spec up to its UUIDs before, see specKey) and writes it atomically;
// it returns the CDI device IDs of each device, in the order of devices.
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
	key, keyed := specKey(data, claimUID, devices)
	var check []atomicfile.Option
	if !keyed || !w.accepted.has(key) {
		check = append(check, atomicfile.Check(w.validate))
	}
	if err := writeSpec(w.opts.SpecDir, name, data, check...); err != nil {
		return nil, err
	}
	if keyed {
		w.accepted.add(key)
	}
	logger(ctx).V(2).Info("Wrote CDI spec", "claim", claimUID, "path", path, "devices", len(spec.Devices))
	return ids, nil
}

// writeSpecFile writes data as dir/name so that a reader (the container runtime's
// watcher) sees the old file or the whole new one, also after the plugin crashed
// (atomicfile: a hidden temporary file, without a .json/.yaml extension so that the
// runtime's scan skips it, which then takes the name). The temporary file is validated by
// the CDI library's own loader first (validateSpecFile), so a spec the runtime would
// refuse never appears under its real name; Writer.Write leaves that out for a spec the
// library accepted before (specKey).
//
// Nothing is fsynced: the spec directory is /var/run/cdi, a tmpfs on real nodes (where
// fsync does nothing), and wherever it is not, losing the page cache means a kernel crash
// or a power loss, so a reboot, after which the pods are gone and the plugin drops the
// specs of the earlier boot (docs/kubelet-plugin.md, "Why nothing is fsynced").
//
// The library's Cache.WriteSpec is not used: it leaves the file 0600.
func writeSpecFile(dir, name string, data []byte) error {
	return writeSpec(dir, name, data, atomicfile.Check(validateSpecFile))
}

// validateSpecFile loads the spec file at path as the container runtime does.
func validateSpecFile(path string) error {
	if _, err := cdiapi.ReadSpec(path, 0); err != nil {
		return fmt.Errorf("validate CDI spec: %w", err)
	}
	return nil
}

// writeSpec is writeSpecFile with the checks of opts instead of the validation.
func writeSpec(dir, name string, data []byte, opts ...atomicfile.Option) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create CDI spec dir: %w", err)
	}
	return atomicfile.WriteFile(filepath.Join(dir, name), data, specPerm, opts...)
}

// Validating a spec with the CDI library's loader, which parses the file as YAML, cost
// more CPU than everything else a prepare does in this package (about 60 us of 1 KB of
// spec), for content that repeats: the specs of a node's claims differ mostly in the
// claim UID and share IDs they name. Whether the library accepts a spec does not depend
// on which UUIDs it names, only on which of them are the same (two devices of one name
// are refused): UUIDs are all of one length and alphabet, and where they go (CDI device
// names, paths, hook arguments) only those are checked. So a spec that equals one the
// library accepted, up to a one-to-one renaming of its UUIDs, is accepted without being
// parsed again. specKey does the renaming; acceptedSpecs remembers what was accepted.

// uuidPlaceholder is what specKey renames a UUID to, followed by the UUID's index as 12
// digits: of a UUID's length, and in a shape no UUID has (z is no hex digit), so that no
// spec names it.
const uuidPlaceholder = "zzzzzzzz-zzzz-zzzz-zzzz-"

// specKey returns the digest of data, the spec of claim claimUID with devices, with the
// claim UID and each distinct share ID renamed to the placeholders 0, 1, ... in the order
// they are listed. It returns false, nothing to remember, when data holds something that
// looks like a placeholder already.
func specKey(data []byte, claimUID string, devices []ClaimDevice) ([sha256.Size]byte, bool) {
	if bytes.Contains(data, []byte(uuidPlaceholder[:13])) {
		return [sha256.Size]byte{}, false
	}
	uuids := []string{claimUID}
	for _, d := range devices {
		if d.ShareID != "" && !slices.Contains(uuids, d.ShareID) {
			uuids = append(uuids, d.ShareID)
		}
	}
	// One pass from the left, as a replacer would make it: a UUID found is renamed and
	// skipped. UUIDs are all of one length, so none is part of another.
	norm := make([]byte, 0, len(data))
	for i := 0; i < len(data); {
		j := slices.IndexFunc(uuids, func(u string) bool { return i+len(u) <= len(data) && string(data[i:i+len(u)]) == u })
		if j < 0 {
			norm = append(norm, data[i])
			i++
			continue
		}
		norm = append(norm, uuidPlaceholder...)
		norm = fmt.Appendf(norm, "%012d", j)
		i += len(uuids[j])
	}
	return sha256.Sum256(norm), true
}

// acceptedSpecs is a bounded set of the keys (specKey) of specs that the CDI library
// accepted. A node's claims make few distinct keys (its ports times the configurations
// in use); should there be more, the set starts over.
type acceptedSpecs struct {
	mu   sync.Mutex
	keys map[[sha256.Size]byte]struct{}
}

// maxAcceptedSpecs bounds acceptedSpecs: 32 bytes each.
const maxAcceptedSpecs = 1024

func (a *acceptedSpecs) has(key [sha256.Size]byte) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.keys[key]
	return ok
}

func (a *acceptedSpecs) add(key [sha256.Size]byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.keys == nil || len(a.keys) >= maxAcceptedSpecs {
		a.keys = make(map[[sha256.Size]byte]struct{})
	}
	a.keys[key] = struct{}{}
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

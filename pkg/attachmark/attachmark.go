// Package attachmark keeps the marks that say a pod's network attachments of a claim are
// complete (docs/network-attachment.md). The kubelet plugin's NRI side writes a mark once
// every device of the claim is attached into the pod and removes it before it detaches
// anything; the CDI spec of such a claim runs rdma-dra-cdi-hook at createRuntime, which
// refuses to start a container of the pod while the mark is missing. A container created
// while the plugin was not connected to the runtime (restarting, crashed in the middle of
// an attach) therefore fails to start, and the kubelet creates it again once the plugin
// has attached the pod's network and can give the container its environment.
//
// A mark is an empty file <dir>/<pod UID>_<claim UID>; both names are UUIDs, checked
// before they become part of a path.
package attachmark

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// SubDir is the marks' directory in the plugin's data directory.
const SubDir = "attached"

// Dir is the marks' directory of the plugin data directory dataDir.
func Dir(dataDir string) string { return filepath.Join(dataDir, SubDir) }

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// path returns the mark's path after checking both UIDs.
func path(dir, podUID, claimUID string) (string, error) {
	if !uuidRE.MatchString(podUID) {
		return "", fmt.Errorf("pod UID %q is not a UUID", podUID)
	}
	if !uuidRE.MatchString(claimUID) {
		return "", fmt.Errorf("claim UID %q is not a UUID", claimUID)
	}
	return filepath.Join(dir, podUID+"_"+claimUID), nil
}

// Mark records that the claim's attachments into the pod are complete.
func Mark(dir, podUID, claimUID string) error {
	p, err := path(dir, podUID, claimUID)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create attachment marks directory: %w", err)
	}
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		return fmt.Errorf("mark attachments of claim %s in pod %s: %w", claimUID, podUID, err)
	}
	return nil
}

// Unmark removes the mark; a missing one is not an error.
func Unmark(dir, podUID, claimUID string) error {
	p, err := path(dir, podUID, claimUID)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove attachment mark of claim %s in pod %s: %w", claimUID, podUID, err)
	}
	return nil
}

// UnmarkClaim removes the marks of the claim in every pod.
func UnmarkClaim(dir, claimUID string) error {
	if !uuidRE.MatchString(claimUID) {
		return fmt.Errorf("claim UID %q is not a UUID", claimUID)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list attachment marks: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "_"+claimUID) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove attachment mark %s: %w", e.Name(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// Marked reports whether the claim's attachments into the pod are complete.
func Marked(dir, podUID, claimUID string) (bool, error) {
	p, err := path(dir, podUID, claimUID)
	if err != nil {
		return false, err
	}
	_, err = os.Stat(p)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	default:
		return false, fmt.Errorf("read attachment mark: %w", err)
	}
}

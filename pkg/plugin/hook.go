package plugin

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
)

// DefaultHookSource is where the hook is looked for when no source is given: next to
// the running plugin's executable.
func DefaultHookSource() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find own executable: %w", err)
	}
	return filepath.Join(filepath.Dir(exe), cdi.HookBinary), nil
}

// InstallHook copies the hook binary from source into dir (created if needed) as name
// (see cdi.HookFileName) and returns the installed path, which CDI specs name: the container runtime runs hooks
// from the host's file system, so dir must be the same path in the plugin's container
// and on the host (a hostPath mount of the same path).
//
// The copy is atomic (atomicfile, with fsync of file and directory): a runtime starting a container at the
// same moment runs the old or the new binary, never half of one. An identical binary
// is left alone.
func InstallHook(ctx context.Context, source, dir, name string) (string, error) {
	data, err := os.ReadFile(source)
	if err != nil {
		return "", fmt.Errorf("read hook binary: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create hook directory: %w", err)
	}
	dst := filepath.Join(dir, name)
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) {
		if err := os.Chmod(dst, 0o755); err != nil {
			return "", fmt.Errorf("set hook mode: %w", err)
		}
		klog.FromContext(ctx).V(2).Info("Hook binary is up to date", "path", dst)
		return dst, nil
	}
	// Synced: the hook lives on the host's disk and must be whole after a power loss.
	if err := atomicfile.WriteFile(dst, data, 0o755, atomicfile.Sync()); err != nil {
		return "", fmt.Errorf("install hook binary: %w", err)
	}
	klog.FromContext(ctx).Info("Installed hook binary", "source", source, "path", dst)
	return dst, nil
}

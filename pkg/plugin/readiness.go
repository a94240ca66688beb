package plugin

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"k8s.io/klog/v2"
)

// Readiness. A plugin pod is ready once the kubelet has registered it: a DaemonSet
// rolling update with surge removes the old pod as soon as the new one is ready, and the
// kubelet refuses prepares ("driver is not registered") while neither is registered.
// The plugin uses the host network, and during a rolling update both instances serve the
// health port (SO_REUSEPORT), so an HTTP probe may be answered by the other instance; the
// readiness probe therefore runs in the container itself (`rdma-dra-kubeletplugin ready`)
// and reads a file in the container's own file system that this instance keeps while it
// is registered.

// readyFilePoll is how often the registration status is copied into the ready file.
const readyFilePoll = 500 * time.Millisecond

// KeepReadyFile keeps path present while the kubelet has the plugin registered and
// absent otherwise, until ctx ends (then it is removed).
func KeepReadyFile(ctx context.Context, path string, reg RegistrationReporter) {
	logger := klog.FromContext(ctx).WithValues("readyFile", path)
	ticker := time.NewTicker(readyFilePoll)
	defer ticker.Stop()
	defer func() {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			logger.Error(err, "Remove the ready file")
		}
	}()
	var was *bool
	failing := ""
	for {
		s := reg.RegistrationStatus()
		now := s != nil && s.PluginRegistered
		if was == nil || *was != now {
			if err := setReadyFile(path, now); err != nil {
				// Retried every poll; logged when the error changes, so that the reason
				// the pod stays unready is in the log without flooding it.
				if err.Error() != failing {
					logger.Error(err, "Update the ready file: the pod's readiness probe fails until it works", "registered", now)
					failing = err.Error()
				}
			} else {
				logger.V(2).Info("Readiness changed", "registered", now)
				was, failing = &now, ""
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func setReadyFile(path string, ready bool) error {
	if ready {
		return os.WriteFile(path, []byte("registered\n"), 0o644)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// CheckReady is the readiness probe: nil when the ready file is there.
func CheckReady(path string) error {
	if path == "" {
		return errors.New("no ready file configured (--ready-file)")
	}
	_, err := os.Stat(path)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("not registered with the kubelet yet (%s is missing)", path)
	default:
		return fmt.Errorf("read ready file: %w", err)
	}
}

//go:build failpoint

// The test-only prepare failpoint, in binaries built with -tags failpoint only: the image
// the end-to-end suite runs (GO_TAGS=failpoint, as make cluster-up sets it). Release
// builds get the no-op stubs of failpoint_off.go instead.

package plugin

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// PrepareHoldEnv names the environment variable of the prepare failpoint. It is for
// end-to-end tests only ("the plugin is killed in the middle of a prepare"): when it holds
// a path and a file exists there, prepare stops right after recording its claims as
// PrepareStarted and waits until the file is removed or the process dies.
const PrepareHoldEnv = "RDMA_DRA_TEST_PREPARE_HOLD"

// PrepareHoldFile returns the hold file PrepareHoldEnv names, for Config.PrepareHoldFile.
func PrepareHoldFile() string {
	return os.Getenv(PrepareHoldEnv)
}

// Failpoint is the test-only prepare hold; a nil *Failpoint is off.
type Failpoint struct {
	path string
	poll time.Duration
	// clock paces the polls of the hold file.
	clock clock.Clock
}

// NewFailpoint returns a hold on path, or nil (off) for an empty path.
func NewFailpoint(path string) *Failpoint {
	if path == "" {
		return nil
	}
	return &Failpoint{path: path, poll: 100 * time.Millisecond, clock: clock.RealClock{}}
}

// Path is the file whose existence holds prepare; empty when off.
func (f *Failpoint) Path() string {
	if f == nil {
		return ""
	}
	return f.path
}

// Wait blocks while the hold file exists. It returns ctx's error if ctx ends first.
func (f *Failpoint) Wait(ctx context.Context) error {
	if f == nil {
		return nil
	}
	logged := false
	for {
		if _, err := os.Stat(f.path); errors.Is(err, fs.ErrNotExist) {
			if logged {
				klog.FromContext(ctx).Info("Test failpoint released, prepare continues", "file", f.path)
			}
			return nil
		}
		if !logged {
			klog.FromContext(ctx).Info("Test failpoint holds prepare after PrepareStarted", "file", f.path, "env", PrepareHoldEnv)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-f.clock.After(f.poll):
		}
	}
}

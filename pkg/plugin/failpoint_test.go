//go:build failpoint

package plugin

import (
	"os"
	"path/filepath"
	"testing"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
)

// The failpoint itself, in a build with -tags failpoint (make test runs these).

func TestFailpointReadsEnv(t *testing.T) {
	t.Setenv(PrepareHoldEnv, "/run/hold")
	if got := PrepareHoldFile(); got != "/run/hold" {
		t.Errorf("PrepareHoldFile() = %q with %s=/run/hold, want /run/hold", got, PrepareHoldEnv)
	}
}

func TestFailpointHoldsPrepare(t *testing.T) {
	h := newHarness(t, "dgx-h100")
	hold := filepath.Join(t.TempDir(), "hold")
	if err := os.WriteFile(hold, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := h.driver()
	d.hold = NewFailpoint(hold)
	d.hold.poll = 1
	c := h.claim("c", exclusive(1))
	reached := make(chan struct{})
	d.step = func(name string) {
		if name == stepStartedSaved {
			close(reached)
		}
	}
	done := make(chan kubeletplugin.PrepareResult)
	go func() { done <- prepareOne(t, d, c) }()
	<-reached
	select {
	case <-done:
		t.Fatal("prepare went on while the hold file exists")
	default:
	}
	if got := h.checkpointClaims(); got[string(c.UID)] != checkpoint.PhasePrepareStarted {
		t.Errorf("held claim is %q in the checkpoint, want PrepareStarted", got[string(c.UID)])
	}
	if err := os.Remove(hold); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Err != nil {
		t.Fatalf("prepare after release: %v", res.Err)
	}
}

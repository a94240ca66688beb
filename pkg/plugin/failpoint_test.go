//go:build failpoint

package plugin

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
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
	clk := testclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
	d.hold = NewFailpoint(hold)
	d.hold.clock = clk
	c := h.claim("c", exclusive(1))
	done := make(chan kubeletplugin.PrepareResult, 1)
	go func() { done <- prepareOne(t, d, c) }()
	// Prepare waits for the next look at the hold file, which exists.
	testwait.For(t, "prepare held", clk.HasWaiters)
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
	clk.Step(d.hold.poll)
	if res := testwait.Receive(t, "prepare after release", done); res.Err != nil {
		t.Fatalf("prepare after release: %v", res.Err)
	}
}

package publish_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/livenode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
)

// TestRepublishFlapping: a port whose link_downed rises is republished with the
// flapping taint after the one poll that read it, though it stays ACTIVE, beside the
// not-ACTIVE taint when it is down too, and without it once it was quiet for the quiet
// window. In a synctest bubble: see livenode.Node.WaitPublished.
func TestRepublishFlapping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := livenode.New(t, "disabled-port", livenode.Options{Clock: testclock.NewFakeClock(epoch), Poll: time.Second,
			Flapping: health.FlapOptions{Window: time.Minute, Quiet: 30 * time.Second, LinkDowned: 2, SymbolErrors: 100}})
		flapping := func(value string) resourceapi.DeviceTaint {
			return resourceapi.DeviceTaint{Key: devicemodel.FlappingTaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule}
		}
		publishes := 1
		steps := []struct {
			name    string
			change  func()
			advance time.Duration
			publish bool
			// want are the taints of mlx5_0's devices after the step.
			want []resourceapi.DeviceTaint
		}{
			{name: "one link down: under the threshold",
				change: func() { n.BumpCounter("mlx5_0", 1, "link_downed", 1) }, advance: time.Second},
			{name: "a second one: flapping, while ACTIVE",
				change: func() { n.BumpCounter("mlx5_0", 1, "link_downed", 1) }, advance: time.Second, publish: true,
				want: []resourceapi.DeviceTaint{flapping("LinkDowned")}},
			{name: "and down now: both taints",
				change: func() { n.SetState("mlx5_0", 1, "1: DOWN", "3: Disabled") }, advance: time.Second, publish: true,
				want: []resourceapi.DeviceTaint{flapping("LinkDowned"), notActive("DOWN", resourceapi.DeviceTaintEffectNoSchedule)[0]}},
			{name: "ACTIVE again: still flapping",
				change: func() { n.SetState("mlx5_0", 1, "4: ACTIVE", "5: LinkUp") }, advance: time.Second, publish: true,
				want: []resourceapi.DeviceTaint{flapping("LinkDowned")}},
			// The first link down was read at 1s: it leaves the window at 61s, so the poll
			// at 60s was the last over the threshold, and the quiet window ends at 90s.
			{name: "the window passes", advance: 57 * time.Second, want: []resourceapi.DeviceTaint{flapping("LinkDowned")}},
			{name: "quiet for less than the quiet window", advance: 28 * time.Second, want: []resourceapi.DeviceTaint{flapping("LinkDowned")}},
			{name: "quiet for the quiet window: untainted", advance: time.Second, publish: true},
		}
		for _, s := range steps {
			if s.change != nil {
				s.change()
			}
			// One poll a second, as the plugin polls.
			for range s.advance / time.Second {
				n.Step(time.Second)
			}
			if s.publish {
				publishes++
			}
			devices := devicesOf(n.WaitPublished(publishes))
			for _, name := range []string{"mlx5-0-p1", "mlx5-0-p1-shared"} {
				if diff := cmp.Diff(s.want, devices[name].Taints); diff != "" {
					t.Errorf("%s: %s taints (-want +got):\n%s", s.name, name, diff)
				}
			}
			if taints := devices["mlx5-1-p1"].Taints; len(taints) != 0 {
				t.Errorf("%s: mlx5-1-p1 tainted %+v", s.name, taints)
			}
		}
	})
}

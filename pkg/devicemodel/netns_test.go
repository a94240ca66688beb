package devicemodel

import (
	"slices"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// TestExclusiveNetnsPublishesNoShares: in exclusive RDMA netns mode an RDMA device can
// be in one pod only, so a node publishes whole ports only, in both models.
func TestExclusiveNetnsPublishesNoShares(t *testing.T) {
	for _, legacy := range []bool{false, true} {
		inv := inventory(ibPort("mlx5_0", 1), rocePort("mlx5_1", 1))
		inv.NetnsMode = discovery.NetnsModeExclusive
		res, err := Build(inv, Options{NodeName: "n1", Legacy: legacy})
		if err != nil {
			t.Fatal(err)
		}
		checkInvariants(t, res)
		if got, want := deviceNames(res), []string{"mlx5-0-p1", "mlx5-1-p1"}; !slices.Equal(got, want) {
			t.Errorf("legacy %v: devices %v, want %v", legacy, got, want)
		}
		for _, name := range deviceNames(res) {
			if m := res.Devices[name].Mode; m != ModeExclusive {
				t.Errorf("legacy %v: %s has mode %s", legacy, name, m)
			}
		}
		// The same node in shared mode has shares.
		inv.NetnsMode = discovery.NetnsModeShared
		shared, err := Build(inv, Options{NodeName: "n1", Legacy: legacy})
		if err != nil {
			t.Fatal(err)
		}
		if len(deviceNames(shared)) <= 2 {
			t.Errorf("legacy %v: shared netns mode publishes only %v", legacy, deviceNames(shared))
		}
	}
}

package devicemodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestFlappingTaints: the health monitor's flapping ports get the flapping taint on both
// devices, beside the not-ACTIVE taint where the port is down too, sorted by key, in
// both models; a legacy device takes the taints of all its ports.
func TestFlappingTaints(t *testing.T) {
	flap := func(value string) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: FlappingTaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	down := func(value string) resourceapi.DeviceTaint {
		return resourceapi.DeviceTaint{Key: NotActiveTaintKey, Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule}
	}
	ports := mixedPorts() // mlx5_00..03 InfiniBand, mlx5_04..05 RoCE
	ports[1].State = "DOWN"
	flapping := map[PortID]string{
		{"mlx5_00", 1}: FlappingLinkDowned,
		{"mlx5_01", 1}: FlappingSymbolErrors,
		{"mlx5_04", 1}: "not a label value!",
		{"mlx5_99", 1}: FlappingLinkDowned, // not on the node: nothing
	}
	tests := []struct {
		name   string
		legacy bool
		config nodeconfig.Config
		// want maps a port's device name to the taints of every device of that port
		// (mlx5-00-p1, mlx5-00-p1-shared, mlx5-00-p1-s0 ...), or a legacy device's name to
		// its taints; the others have none.
		want map[string][]resourceapi.DeviceTaint
	}{
		{
			name: "partitionable",
			want: map[string][]resourceapi.DeviceTaint{
				"mlx5-00-p1": {flap("LinkDowned")},
				"mlx5-01-p1": {flap("SymbolErrors"), down("DOWN")},
				"mlx5-04-p1": {flap("Unknown")},
			},
		},
		{
			name:   "legacy model",
			legacy: true,
			want: map[string][]resourceapi.DeviceTaint{
				"mlx5-00-p1": {flap("LinkDowned")},
				"mlx5-01-p1": {flap("SymbolErrors"), down("DOWN")},
				"mlx5-04-p1": {flap("Unknown")},
			},
		},
		{
			name: "legacy resources: every port's taints, the first of each key",
			config: legacyConfig(nodeconfig.ModesBoth,
				nodeconfig.LegacyResource{Name: "ib", MaxPods: 4, Selectors: nodeconfig.Selector{LinkTypes: []string{"InfiniBand"}}},
				nodeconfig.LegacyResource{Name: "roce", MaxPods: 4, Selectors: nodeconfig.Selector{LinkTypes: []string{"Ethernet"}}}),
			want: map[string][]resourceapi.DeviceTaint{
				"mlx5-00-p1":  {flap("LinkDowned")},
				"mlx5-01-p1":  {flap("SymbolErrors"), down("DOWN")},
				"mlx5-04-p1":  {flap("Unknown")},
				"legacy-ib":   {flap("LinkDowned"), down("DOWN")},
				"legacy-roce": {flap("Unknown")},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(inventory(ports...), Options{NodeName: "n", Legacy: tt.legacy, Config: tt.config, Flapping: flapping})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			for _, n := range deviceNames(res) {
				var want []resourceapi.DeviceTaint
				for prefix, taints := range tt.want {
					if n == prefix || strings.HasPrefix(n, prefix+"-") {
						want = taints
					}
				}
				if diff := cmp.Diff(want, device(t, res, n).Taints); diff != "" {
					t.Errorf("%s taints (-want +got):\n%s", n, diff)
				}
			}
		})
	}
}

// TestFlappingTaintsKeepTheLayout: a taint changes no slice's device limit in a way that
// moves ports between slices, since every default-model slice consumes counters anyway.
func TestFlappingTaintsKeepTheLayout(t *testing.T) {
	ports := manyPorts(40)
	before, err := Build(inventory(ports...), Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	after, err := Build(inventory(ports...), Options{NodeName: "n", Flapping: map[PortID]string{{ports[3].IBDev, 1}: FlappingLinkDowned}})
	if err != nil {
		t.Fatal(err)
	}
	layout := func(r *Result) (out [][]string) {
		for _, s := range r.Resources.Pools[r.PoolName].Slices {
			var names []string
			for _, d := range s.Devices {
				names = append(names, d.Name)
			}
			out = append(out, names)
		}
		return out
	}
	if diff := cmp.Diff(layout(before), layout(after)); diff != "" {
		t.Errorf("a flapping port moved devices between slices (-before +after):\n%s", diff)
	}
}

package devicemodel

import (
	"encoding/json"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestFabricGate checks which devices carry the binding conditions of fabric readiness,
// in every model: the devices of the gated ports and nothing else, with no device and no
// counter added.
func TestFabricGate(t *testing.T) {
	ib0, ib1, roce := ibPort("mlx5_0", 1), ibPort("mlx5_1", 1), rocePort("mlx5_8", 1)
	ib1.PCIBusID = "0000:04:00.0"
	ports := []discovery.Port{ib0, ib1, roce}
	onlyIB := nodeconfig.FabricReadiness{Enabled: true, Include: []nodeconfig.Selector{{LinkTypes: []string{discovery.LinkLayerInfiniBand}}}}
	tests := []struct {
		name   string
		legacy bool
		cfg    nodeconfig.Config
		gated  []string
	}{
		{name: "off", cfg: nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Include: onlyIB.Include}}},
		{name: "every port", cfg: nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Enabled: true}},
			gated: []string{"mlx5-0-p1", "mlx5-0-p1-shared", "mlx5-1-p1", "mlx5-1-p1-shared", "mlx5-8-p1", "mlx5-8-p1-shared"}},
		{name: "InfiniBand ports", cfg: nodeconfig.Config{FabricReadiness: onlyIB},
			gated: []string{"mlx5-0-p1", "mlx5-0-p1-shared", "mlx5-1-p1", "mlx5-1-p1-shared"}},
		{name: "exclude wins", cfg: nodeconfig.Config{FabricReadiness: nodeconfig.FabricReadiness{Enabled: true, Include: onlyIB.Include,
			Exclude: []nodeconfig.Selector{{IBDevs: []string{"mlx5_1"}}}}},
			gated: []string{"mlx5-0-p1", "mlx5-0-p1-shared"}},
		{name: "legacy shares", legacy: true, cfg: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: 2}, FabricReadiness: onlyIB},
			gated: []string{"mlx5-0-p1-s0", "mlx5-0-p1-s1", "mlx5-1-p1-s0", "mlx5-1-p1-s1"}},
		{name: "legacy exclusive", legacy: true, cfg: nodeconfig.Config{Modes: nodeconfig.ModesExclusive, FabricReadiness: onlyIB},
			gated: []string{"mlx5-0-p1", "mlx5-1-p1"}},
		{name: "a legacy resource with one gated rail is gated", cfg: nodeconfig.Config{
			LegacyResources: []nodeconfig.LegacyResource{{Name: "all-rails"}},
			FabricReadiness: nodeconfig.FabricReadiness{Enabled: true, Include: []nodeconfig.Selector{{IBDevs: []string{"mlx5_1"}}}}},
			gated: []string{"legacy-all-rails", "mlx5-1-p1", "mlx5-1-p1-shared"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain := tt.cfg
			plain.FabricReadiness = nodeconfig.FabricReadiness{}
			want, err := Build(inventory(ports...), Options{NodeName: "node-a", Legacy: tt.legacy, Config: plain})
			if err != nil {
				t.Fatal(err)
			}
			res, err := Build(inventory(ports...), Options{NodeName: "node-a", Legacy: tt.legacy, Config: tt.cfg})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			var gated []string
			for _, name := range deviceNames(res) {
				d := device(t, res, name)
				meta := res.Devices[name]
				has := slices.Equal(d.BindingConditions, []string{FabricReadyCondition}) &&
					slices.Equal(d.BindingFailureConditions, []string{FabricFailedCondition})
				if has != meta.FabricGated {
					t.Errorf("%s: binding conditions %v/%v, Result.Devices says gated %v", name, d.BindingConditions, d.BindingFailureConditions, meta.FabricGated)
				}
				if meta.FabricGated {
					gated = append(gated, name)
				} else if len(d.BindingConditions)+len(d.BindingFailureConditions) > 0 {
					t.Errorf("%s: binding conditions %v/%v on a device that is not gated", name, d.BindingConditions, d.BindingFailureConditions)
				}
				// Everything else is what the node publishes without the gate.
				d.BindingConditions, d.BindingFailureConditions = nil, nil
				if plainDev := device(t, want, name); !equalJSON(t, d, plainDev) {
					t.Errorf("%s differs from the ungated model beyond its binding conditions", name)
				}
			}
			slices.Sort(gated)
			slices.Sort(tt.gated)
			if !slices.Equal(gated, tt.gated) {
				t.Errorf("gated devices %v, want %v", gated, tt.gated)
			}
			if got, w := layout(res), layout(want); !slices.Equal(got, w) {
				t.Errorf("slice layout %v, without the gate %v", got, w)
			}
		})
	}
}

func equalJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

// TestFabricGateSliceSize measures what the gate adds to a node's slices: the JSON of the
// two condition lists on every device, nothing else. docs/device-model.md quotes the
// figures of a node like the mock dgx-h100 (8 InfiniBand ports and 2 RoCE ports).
func TestFabricGateSliceSize(t *testing.T) {
	ports := manyPorts(8)
	for i := range 2 {
		p := rocePort("mlx5_1"+string(rune('0'+i)), 1)
		p.PCIBusID = "0000:a" + string(rune('0'+i)) + ":00.0"
		ports = append(ports, p)
	}
	size := func(cfg nodeconfig.Config, legacy bool) (int, int) {
		res, err := Build(inventory(ports...), Options{NodeName: "node-a", Legacy: legacy, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, s := range res.Resources.Pools[res.PoolName].Slices {
			spec := resourceapi.ResourceSliceSpec{Driver: DefaultDriverName, Devices: s.Devices, SharedCounters: s.SharedCounters}
			b, err := json.Marshal(spec)
			if err != nil {
				t.Fatal(err)
			}
			n += len(b)
		}
		return n, len(res.Devices)
	}
	gate := nodeconfig.FabricReadiness{Enabled: true}
	// What one gated device adds on the wire.
	perDevice := len(`,"bindingConditions":["rdma.dra.io/FabricReady"],"bindingFailureConditions":["rdma.dra.io/FabricFailed"]`)
	for _, tc := range []struct {
		name   string
		legacy bool
		cfg    nodeconfig.Config
	}{
		{name: "default model", cfg: nodeconfig.Config{}},
		{name: "legacy model, 2 shares", legacy: true, cfg: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, devices := size(tc.cfg, tc.legacy)
			gated := tc.cfg
			gated.FabricReadiness = gate
			after, _ := size(gated, tc.legacy)
			t.Logf("%d devices: %d bytes of slice JSON without the gate, %d with it (+%d, %d per device, +%.1f%%)",
				devices, before, after, after-before, perDevice, 100*float64(after-before)/float64(before))
			if after-before != devices*perDevice {
				t.Errorf("the gate adds %d bytes, want %d devices × %d", after-before, devices, perDevice)
			}
		})
	}
}

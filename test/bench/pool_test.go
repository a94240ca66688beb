package bench

import (
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCompletePool covers the moments a starting plugin passes through: its counter slice
// created and its device slice not yet (the state that made the load node "publish no
// shared devices"), the whole pool, a republish that bumped the generation half way.
func TestCompletePool(t *testing.T) {
	const driver, pool = "rdma.dra.io", "node-a-rdma"
	slice := func(name, drv, poolName string, gen, count int64, devices ...string) resourceapi.ResourceSlice {
		s := resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       resourceapi.ResourceSliceSpec{Driver: drv, Pool: resourceapi.ResourcePool{Name: poolName, Generation: gen, ResourceSliceCount: count}},
		}
		if len(devices) == 0 {
			s.Spec.SharedCounters = []resourceapi.CounterSet{{Name: "mlx5-0-p1"}}
		}
		for _, d := range devices {
			s.Spec.Devices = append(s.Spec.Devices, resourceapi.Device{Name: d})
		}
		return s
	}
	counters := slice("a-counters", driver, pool, 1, 2)
	devices := slice("b-devices", driver, pool, 1, 2, "mlx5-0-p1", "mlx5-0-p1-shared")
	tests := []struct {
		name    string
		slices  []resourceapi.ResourceSlice
		want    []string
		wantErr string
	}{
		{name: "nothing yet", wantErr: "not published"},
		{name: "counter slice only", slices: []resourceapi.ResourceSlice{counters}, wantErr: "1 of 2 slices"},
		{name: "whole pool", slices: []resourceapi.ResourceSlice{devices, counters}, want: []string{"mlx5-0-p1", "mlx5-0-p1-shared"}},
		{name: "other driver and pool left out", slices: []resourceapi.ResourceSlice{
			counters, devices, slice("c-other", "gpu.example.com", pool, 3, 1, "gpu-0"), slice("d-other", driver, "elsewhere", 3, 1, "x"),
		}, want: []string{"mlx5-0-p1", "mlx5-0-p1-shared"}},
		{name: "newer generation incomplete", slices: []resourceapi.ResourceSlice{
			counters, devices, slice("e-counters", driver, pool, 2, 2),
		}, wantErr: "generation 2: 1 of 2 slices"},
		{name: "newer generation complete, stale slice ignored", slices: []resourceapi.ResourceSlice{
			devices, slice("e-counters", driver, pool, 2, 2), slice("f-devices", driver, pool, 2, 2, "mlx5-0-p1-s0"),
		}, want: []string{"mlx5-0-p1-s0"}},
		{name: "slice counts disagree", slices: []resourceapi.ResourceSlice{
			counters, slice("b-devices", driver, pool, 1, 3, "mlx5-0-p1"),
		}, wantErr: "disagree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := completePool(tt.slices, driver, pool)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("completePool = %v, %v; want an error with %q", deviceNames(got), err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(deviceNames(got), tt.want) {
				t.Errorf("devices %v, want %v", deviceNames(got), tt.want)
			}
		})
	}
}

func deviceNames(devices []resourceapi.Device) []string {
	out := []string{}
	for _, d := range devices {
		out = append(out, d.Name)
	}
	return out
}

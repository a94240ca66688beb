package plugin

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// legacyHarness is a dgx-h100 node (eight InfiniBand ports mlx5_0..7, two RoCE ports)
// whose legacy resource "ib" takes the InfiniBand ports, shared by at most two claims.
func legacyHarness(t *testing.T) *harness {
	return newHarnessWithConfig(t, "dgx-h100", nodeconfig.Config{LegacyResources: []nodeconfig.LegacyResource{
		{Name: "ib", MaxPods: 2, Selectors: nodeconfig.Selector{LinkTypes: []string{"InfiniBand"}}},
	}})
}

func legacyAlloc(share int) []alloc {
	return []alloc{{request: "rdma", device: "legacy-ib", shareID: fmt.Sprintf("%08d-1111-4111-8111-111111111111", share)}}
}

// TestPrepareLegacyDevice prepares the device plugin's unit: every port of the legacy
// resource goes into the container, and NCCL is told about each.
func TestPrepareLegacyDevice(t *testing.T) {
	h := legacyHarness(t)
	d := h.driver()
	claim := h.claim("legacy", legacyAlloc(1))
	res := prepareOne(t, d, claim)
	if res.Err != nil {
		t.Fatalf("prepare: %v", res.Err)
	}
	data, err := os.ReadFile(filepath.Join(h.cdiDir, cdi.SpecFileName(testDriver, string(claim.UID))))
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Devices []struct {
			ContainerEdits struct {
				DeviceNodes []struct{ Path string } `json:"deviceNodes"`
			} `json:"containerEdits"`
		} `json:"devices"`
		ContainerEdits struct {
			Env []string `json:"env"`
		} `json:"containerEdits"`
	}
	if err := json.Unmarshal(data, &spec); err != nil {
		t.Fatal(err)
	}
	var hcas, nodes []string
	for i := range 8 {
		hcas = append(hcas, fmt.Sprintf("mlx5_%d:1", i))
	}
	if len(spec.Devices) != 1 {
		t.Fatalf("spec has %d devices, want 1", len(spec.Devices))
	}
	for _, n := range spec.Devices[0].ContainerEdits.DeviceNodes {
		nodes = append(nodes, n.Path)
	}
	if len(nodes) != 8 || !strings.HasPrefix(nodes[0], "/dev/infiniband/uverbs") {
		t.Errorf("device nodes %v, want the eight ports' uverbs nodes (the default char devices)", nodes)
	}
	if want := "NCCL_IB_HCA==" + strings.Join(hcas, ","); !slices.Contains(spec.ContainerEdits.Env, want) {
		t.Errorf("env %v has no %s", spec.ContainerEdits.Env, want)
	}

	got := waitForStatus(t, h, claim.Name)
	var status v1alpha1.DeviceStatusData
	if err := json.Unmarshal(got.Status.Devices[0].Data.Raw, &status); err != nil {
		t.Fatal(err)
	}
	ports := []string{fmt.Sprintf("%s/%d", status.IBDev, status.Port)}
	for _, m := range status.MorePorts {
		ports = append(ports, fmt.Sprintf("%s/%d", m.IBDev, m.Port))
	}
	if len(ports) != 8 || ports[0] != "mlx5_0/1" || ports[7] != "mlx5_7/1" {
		t.Errorf("status data names ports %v, want mlx5_0/1 .. mlx5_7/1", ports)
	}
}

// TestLegacyDeviceOverlap checks the prepare guard, the twin of the counters: legacy
// claims share the ports with each other (up to maxPods) and with shares of the ports,
// never with a whole-port claim, in either order.
func TestLegacyDeviceOverlap(t *testing.T) {
	tests := []struct {
		name    string
		first   []alloc
		second  []alloc
		wantErr string // of the second; empty: both prepare
	}{
		{"two legacy claims", legacyAlloc(1), legacyAlloc(2), ""},
		{"legacy beyond maxPods", legacyAlloc(1), nil, `asks for 1 shares of device "legacy-ib", which is published with 2 shares of which 2 are prepared`},
		{"legacy and a share of one of its ports", legacyAlloc(1), []alloc{{request: "r", device: "mlx5-3-p1-shared", shareID: "33333333-3333-4333-8333-333333333333"}}, ""},
		{"whole port after legacy", legacyAlloc(1), []alloc{{request: "r", device: "mlx5-3-p1"}}, "an exclusive device needs its port to itself"},
		{"legacy after whole port", []alloc{{request: "r", device: "mlx5-3-p1"}}, legacyAlloc(1), "the port is held exclusively"},
		{"whole RoCE port the resource does not take", legacyAlloc(1), []alloc{{request: "r", device: "mlx5-8-p1"}}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := legacyHarness(t)
			d := h.driver()
			if res := prepareOne(t, d, h.claim("first", tt.first)); res.Err != nil {
				t.Fatalf("prepare first: %v", res.Err)
			}
			second := tt.second
			if second == nil { // fill the device up first
				if res := prepareOne(t, d, h.claim("filler", legacyAlloc(2))); res.Err != nil {
					t.Fatalf("prepare filler: %v", res.Err)
				}
				second = legacyAlloc(3)
			}
			res := prepareOne(t, d, h.claim("second", second))
			switch {
			case tt.wantErr == "" && res.Err != nil:
				t.Errorf("prepare second: %v", res.Err)
			case tt.wantErr != "" && (res.Err == nil || !strings.Contains(res.Err.Error(), tt.wantErr)):
				t.Errorf("prepare second: error %v, want one with %q", res.Err, tt.wantErr)
			}
		})
	}
}

// TestLegacyDeviceRefusesNetwork: a device of eight ports has no one netdev to attach.
func TestLegacyDeviceRefusesNetwork(t *testing.T) {
	h := legacyHarness(t)
	d := h.driver()
	params := `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","network":{"mode":"ipoib","ipam":"none"}}`
	claim := h.claim("net", legacyAlloc(1), opaque(resourceapi.AllocationConfigSourceClass, params))
	res := prepareOne(t, d, claim)
	want := "device legacy-ib stands for 8 ports of legacy resource and network mode ipoib attaches one port's netdev"
	if res.Err == nil || !strings.Contains(res.Err.Error(), want) {
		t.Fatalf("prepare: %v, want an error with %q", res.Err, want)
	}
	if diff := cmp.Diff([]string(nil), files(t, h.cdiDir)); diff != "" {
		t.Errorf("CDI dir (-want +got):\n%s", diff)
	}
}

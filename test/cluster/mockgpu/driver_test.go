package mockgpu

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
)

// result is one allocated device of a claim.
type result struct{ request, driver, pool, device string }

func allocatedClaim(uid string, results ...result) *resourceapi.ResourceClaim {
	claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim-" + uid[:4], UID: types.UID(uid)}}
	claim.Status.Allocation = &resourceapi.AllocationResult{}
	for _, r := range results {
		claim.Status.Allocation.Devices.Results = append(claim.Status.Allocation.Devices.Results, resourceapi.DeviceRequestAllocationResult{
			Request: r.request, Driver: r.driver, Pool: r.pool, Device: r.device,
		})
	}
	return claim
}

func TestPrepareResourceClaims(t *testing.T) {
	const (
		uidPair    = "11111111-2222-4333-8444-555555555555"
		uidUnalloc = "22222222-2222-4333-8444-555555555555"
		uidUnknown = "33333333-2222-4333-8444-555555555555"
		uidPool    = "44444444-2222-4333-8444-555555555555"
		uidRDMA    = "55555555-2222-4333-8444-555555555555"
	)
	unallocated := allocatedClaim(uidUnalloc)
	unallocated.Status.Allocation = nil
	claims := []*resourceapi.ResourceClaim{
		// Two GPUs and an RDMA port, GPUs out of index order.
		allocatedClaim(uidPair,
			result{"gpus", DriverName, "node-a-gpu", "gpu-1"},
			result{"nic", "rdma.dra.io", "node-a-rdma", "mlx5-0-p1"},
			result{"gpus", DriverName, "node-a-gpu", "gpu-0"}),
		unallocated,
		allocatedClaim(uidUnknown, result{"gpu", DriverName, "node-a-gpu", "gpu-7"}),
		allocatedClaim(uidPool, result{"gpu", DriverName, "node-b-gpu", "gpu-0"}),
		// Nothing of this driver: nothing to prepare, no spec.
		allocatedClaim(uidRDMA, result{"nic", "rdma.dra.io", "node-a-rdma", "mlx5-0-p1"}),
	}
	dir := t.TempDir()
	d := NewDriver("node-a", fixtureGPUs(), dir, nil)
	_, ctx := ktesting.NewTestContext(t)
	got, err := d.PrepareResourceClaims(ctx, claims)
	if err != nil {
		t.Fatalf("PrepareResourceClaims() error = %v", err)
	}

	wantDevices := map[types.UID][]kubeletplugin.Device{
		uidPair: {{
			Requests: []string{"gpus"}, PoolName: "node-a-gpu", DeviceName: "gpu-1",
			CDIDeviceIDs: []string{"gpu.mock.rdma.dra.io/gpu=" + uidPair + "-gpu-1"},
		}, {
			Requests: []string{"gpus"}, PoolName: "node-a-gpu", DeviceName: "gpu-0",
			CDIDeviceIDs: []string{"gpu.mock.rdma.dra.io/gpu=" + uidPair + "-gpu-0"},
		}},
	}
	wantErr := map[types.UID]string{
		uidUnalloc: "prepare claim ns/claim-2222: not allocated",
		uidUnknown: "device gpu-7 of request \"gpu\": no such GPU on this node",
		uidPool:    "device gpu-0 of request \"gpu\" is in pool node-b-gpu, not in this node's pool node-a-gpu",
	}
	if len(got) != len(claims) {
		t.Errorf("got %d results for %d claims", len(got), len(claims))
	}
	for _, c := range claims {
		r, ok := got[c.UID]
		if !ok {
			t.Errorf("claim %s: no result", c.UID)
			continue
		}
		if want := wantErr[c.UID]; want != "" {
			if r.Err == nil || !strings.Contains(r.Err.Error(), want) {
				t.Errorf("claim %s: error = %v, want one containing %q", c.UID, r.Err, want)
			}
			continue
		}
		if r.Err != nil {
			t.Errorf("claim %s: error = %v", c.UID, r.Err)
		}
		if diff := cmp.Diff(wantDevices[c.UID], r.Devices); diff != "" {
			t.Errorf("claim %s: devices mismatch (-want +got):\n%s", c.UID, diff)
		}
	}
	if specs := specFiles(t, dir); !cmp.Equal(specs, []string{"gpu.mock.rdma.dra.io-gpu_" + uidPair + ".json"}) {
		t.Errorf("spec files after prepare = %v, want the one of claim %s", specs, uidPair)
	}
	if env := injectedEnv(t, dir, wantDevices[uidPair][0].CDIDeviceIDs); !slices.Contains(env, "MOCK_GPU_BUS_IDS=0000:9a:00.0,0000:1b:00.0") {
		t.Errorf("environment of the pair claim = %v, want the bus IDs in allocation order", env)
	}

	// Prepare is idempotent: the kubelet asks again after a restart.
	again, err := d.PrepareResourceClaims(ctx, claims[:1])
	if err != nil || again[uidPair].Err != nil {
		t.Fatalf("second prepare: %v, %v", err, again[uidPair].Err)
	}
	if diff := cmp.Diff(wantDevices[uidPair], again[uidPair].Devices); diff != "" {
		t.Errorf("second prepare: devices mismatch (-want +got):\n%s", diff)
	}
}

func TestUnprepareResourceClaims(t *testing.T) {
	const (
		uidPrepared = "11111111-2222-4333-8444-555555555555"
		uidUnknown  = "66666666-2222-4333-8444-555555555555"
	)
	dir := t.TempDir()
	d := NewDriver("node-a", fixtureGPUs(), dir, nil)
	_, ctx := ktesting.NewTestContext(t)
	prepared, err := d.PrepareResourceClaims(ctx, []*resourceapi.ResourceClaim{
		allocatedClaim(uidPrepared, result{"gpu", DriverName, "node-a-gpu", "gpu-2"}),
	})
	if err != nil || prepared[uidPrepared].Err != nil {
		t.Fatalf("prepare: %v, %v", err, prepared[uidPrepared].Err)
	}
	claims := []kubeletplugin.NamespacedObject{
		{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "prepared"}, UID: uidPrepared},
		// Never prepared here (or unprepared before a restart): not an error.
		{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "unknown"}, UID: uidUnknown},
	}
	for _, round := range []string{"first", "repeated"} {
		got, err := d.UnprepareResourceClaims(ctx, claims)
		if err != nil {
			t.Fatalf("%s unprepare: %v", round, err)
		}
		want := map[types.UID]error{uidPrepared: nil, uidUnknown: nil}
		if diff := cmp.Diff(want, got, cmpopts.EquateErrors()); diff != "" {
			t.Errorf("%s unprepare: results mismatch (-want +got):\n%s", round, diff)
		}
		if specs := specFiles(t, dir); len(specs) != 0 {
			t.Errorf("%s unprepare left spec files %v", round, specs)
		}
	}
}

func TestHandleError(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		wantFatal bool
	}{
		{name: "recoverable", err: errors.Join(kubeletplugin.ErrRecoverable, errors.New("slice update conflict"))},
		{name: "fatal", err: errors.New("gRPC server failed"), wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var fatal error
			d := NewDriver("node-a", nil, t.TempDir(), func(err error) { fatal = err })
			d.HandleError(context.Background(), tt.err, "background work")
			if (fatal != nil) != tt.wantFatal {
				t.Fatalf("fatal = %v, want fatal %v", fatal, tt.wantFatal)
			}
			if fatal != nil && !errors.Is(fatal, tt.err) {
				t.Errorf("fatal error %v does not wrap %v", fatal, tt.err)
			}
		})
	}
}

// specFiles lists the names in dir, hidden (temporary) files included.
func specFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

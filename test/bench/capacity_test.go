package bench

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// TestSharesRequests runs the scheduler's allocator over the shared device of one port
// of the 8-port node as the default model publishes it: a claim gets one share unless it
// asks for more, a request of 0 is rounded up to 1, and a request beyond the port's
// shares, or beyond the shares left, is never allocated, although the shares' valid
// range publishes no Max (the allocator holds requests to the capacity's value).
func TestSharesRequests(t *testing.T) {
	ctx := context.Background()
	inv, err := eightPortInventory(ctx, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	slices, res, err := DefaultVariant.build(inv, "node-0000")
	if err != nil {
		t.Fatal(err)
	}
	const device = "mlx5-0-p1-shared"
	shares := int64(res.Devices[device].MaxShares)
	if shares < 2 {
		t.Fatalf("%s has %d shares, want at least 2", device, shares)
	}
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: sharedClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: `device.attributes["rdma.dra.io"].mode == "shared" && device.attributes["rdma.dra.io"].ibdev == "mlx5_0"`}}}},
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-0000"}}

	for _, tt := range []struct {
		name string
		// request is the claim's shares request; nil asks for none.
		request *int64
		// held are the shares other claims hold already.
		held     int64
		want     bool
		consumed int64
	}{
		{name: "no request takes one share", want: true, consumed: 1},
		{name: "0 rounds up to 1", request: new(int64(0)), want: true, consumed: 1},
		{name: "all shares", request: new(shares), want: true, consumed: shares},
		{name: "one share more than the port has", request: new(shares + 1)},
		{name: "the shares left", request: new(int64(1)), held: shares - 1, want: true, consumed: 1},
		{name: "more than the shares left", request: new(int64(2)), held: shares - 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state := structured.AllocatedState{
				AllocatedDevices:         sets.New[structured.DeviceID](),
				AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
				AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
			}
			id := structured.MakeDeviceID(res.DriverName, res.PoolName, device)
			if tt.held > 0 {
				state.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id,
					map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: *apiresource.NewQuantity(tt.held, apiresource.DecimalSI)}))
			}
			req := resourceapi.ExactDeviceRequest{DeviceClassName: class.Name, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
			if tt.request != nil {
				req.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]apiresource.Quantity{
					devicemodel.SharesCapacity: *apiresource.NewQuantity(*tt.request, apiresource.DecimalSI)}}
			}
			claim := &resourceapi.ResourceClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "claim", UID: "claim-uid"},
				Spec:       resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{Name: "rdma", Exactly: &req}}}},
			}
			alloc, err := structured.NewAllocator(ctx, allocFeatures, state, classLister{class.Name: class}, slices, cel.NewCache(10, cel.Features{}))
			if err != nil {
				t.Fatal(err)
			}
			got, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
			if err != nil {
				t.Fatal(err)
			}
			if (len(got) > 0) != tt.want {
				t.Fatalf("allocated = %v, want %v", len(got) > 0, tt.want)
			}
			if !tt.want {
				return
			}
			r := got[0].Devices.Results[0]
			if c := r.ConsumedCapacity[devicemodel.SharesCapacity]; r.Device != device || c.Value() != tt.consumed {
				t.Errorf("allocated %s consuming %s shares, want %s consuming %d", r.Device, c.String(), device, tt.consumed)
			}
		})
	}
}

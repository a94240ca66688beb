package v1alpha1

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/utils/ptr"
)

// TestDeviceStatusDataJSON pins the JSON of a claim's status.devices[].data: readers
// decode what plugins of earlier versions wrote, so keys and omissions never change.
func TestDeviceStatusDataJSON(t *testing.T) {
	for _, tc := range []struct {
		name string
		data DeviceStatusData
		want string
	}{
		{name: "minimal", data: DeviceStatusData{IBDev: "mlx5_0", Port: 1}, want: `{"ibdev":"mlx5_0","port":1}`},
		{name: "gid index zero", data: DeviceStatusData{IBDev: "mlx5_2", Port: 1, GIDIndex: ptr.To(0)}, want: `{"ibdev":"mlx5_2","port":1,"gid_index":0}`},
		{name: "every field", data: DeviceStatusData{IBDev: "mlx5_bond_0", Port: 1, LinkLayer: "Ethernet", GIDIndex: ptr.To(3), Netdev: "bond0", UVerbs: "/dev/infiniband/uverbs4",
			MorePorts: []DeviceStatusData{{IBDev: "mlx5_1", Port: 2, LinkLayer: "InfiniBand", Netdev: "ibp3s0f1", UVerbs: "/dev/infiniband/uverbs1"}}},
			want: `{"ibdev":"mlx5_bond_0","port":1,"link_layer":"Ethernet","gid_index":3,"netdev":"bond0","uverbs":"/dev/infiniband/uverbs4","more_ports":[{"ibdev":"mlx5_1","port":2,"link_layer":"InfiniBand","netdev":"ibp3s0f1","uverbs":"/dev/infiniband/uverbs1"}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := json.Marshal(tc.data)
			if err != nil {
				t.Fatal(err)
			}
			if string(raw) != tc.want {
				t.Errorf("encoded\n got %s\nwant %s", raw, tc.want)
			}
			var back DeviceStatusData
			if err := json.Unmarshal([]byte(tc.want), &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back, tc.data) {
				t.Errorf("decoded %+v, want %+v", back, tc.data)
			}
		})
	}
}

// TestDeviceStatusDataDeepCopy checks that the generated deep copy shares nothing with
// the original: a writer keeps copies of what callers hand it.
func TestDeviceStatusDataDeepCopy(t *testing.T) {
	in := &DeviceStatusData{IBDev: "mlx5_0", Port: 1, GIDIndex: ptr.To(3), MorePorts: []DeviceStatusData{{IBDev: "mlx5_1", Port: 1, GIDIndex: ptr.To(5)}}}
	out := in.DeepCopy()
	if !reflect.DeepEqual(in, out) {
		t.Fatalf("copy %+v, want %+v", out, in)
	}
	*out.GIDIndex, *out.MorePorts[0].GIDIndex, out.MorePorts[0].IBDev = 7, 8, "mlx5_9"
	if *in.GIDIndex != 3 || *in.MorePorts[0].GIDIndex != 5 || in.MorePorts[0].IBDev != "mlx5_1" {
		t.Errorf("changing the copy changed the original: %+v", in)
	}
}

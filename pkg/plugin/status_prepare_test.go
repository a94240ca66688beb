package plugin

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// TestDeviceDataIsInventorySubset: each port fact of the status data is the inventory's
// field of the same name, type and JSON key, and newDeviceData copies it, so that a
// claim's status and rdma-dra discover -o json name a fact alike.
func TestDeviceDataIsInventorySubset(t *testing.T) {
	port := discovery.Port{
		IBDev: "mlx5_bond_0", Port: 2, LinkLayer: discovery.LinkLayerEthernet, GIDIndex: ptr.To(3), Netdev: "bond0",
		State: "ACTIVE", SpeedGbps: ptr.To(200), MTU: ptr.To(9000), NUMANode: ptr.To(1), LAG: true,
		Verbs: &discovery.CharDev{Name: "uverbs4", Major: 231, Minor: 196},
	}
	data := newDeviceData(&port, "/dev/infiniband/uverbs4")
	dv, pv := reflect.ValueOf(*data), reflect.ValueOf(port)
	for i := range dv.NumField() {
		f := dv.Type().Field(i)
		t.Run(f.Name, func(t *testing.T) {
			if f.Name == "MorePorts" {
				if data.MorePorts != nil {
					t.Errorf("MorePorts = %v, want none for the device of one port", data.MorePorts)
				}
				return
			}
			if f.Name == "UVerbs" {
				if data.UVerbs != "/dev/infiniband/uverbs4" {
					t.Errorf("UVerbs = %q, want the container path given", data.UVerbs)
				}
				return
			}
			pf, ok := pv.Type().FieldByName(f.Name)
			if !ok {
				t.Fatalf("discovery.Port has no field %s: the status data reports a fact the inventory does not", f.Name)
			}
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			pkey, _, _ := strings.Cut(pf.Tag.Get("json"), ",")
			if f.Type != pf.Type || key != pkey {
				t.Errorf("%s %s (json %q), inventory %s (json %q)", f.Name, f.Type, key, pf.Type, pkey)
			}
			if got, want := dv.Field(i).Interface(), pv.FieldByIndex(pf.Index).Interface(); !reflect.DeepEqual(got, want) {
				t.Errorf("newDeviceData: %s = %v, want the port's %v", f.Name, got, want)
			}
		})
	}
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"ibdev":"mlx5_bond_0","port":2,"link_layer":"Ethernet","gid_index":3,"netdev":"bond0","uverbs":"/dev/infiniband/uverbs4"}`; string(raw) != want {
		t.Errorf("status data %s, want %s", raw, want)
	}
}

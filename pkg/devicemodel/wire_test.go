package devicemodel

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

func TestAttributeNamesOnWire(t *testing.T) {
	port := discovery.Port{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand, State: "ACTIVE",
		PCIBusID: "0000:03:00.0", PCIeRoot: "pci0000:00"}
	for _, tc := range []struct {
		driver         string
		wantIBDev      resourceapi.QualifiedName // the key ibdev is published under
		wantStandard   resourceapi.QualifiedName // standard attributes always keep their domain
		wantNoShortKey bool
	}{
		{driver: DefaultDriverName, wantIBDev: "ibdev", wantStandard: "resource.kubernetes.io/pciBusID"},
		{driver: "rdma.example.com", wantIBDev: "rdma.dra.io/ibdev", wantStandard: "resource.kubernetes.io/pciBusID", wantNoShortKey: true},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			res, err := Build(&discovery.Inventory{Ports: []discovery.Port{port}}, Options{DriverName: tc.driver, NodeName: "node-a"})
			if err != nil {
				t.Fatal(err)
			}
			d := device(t, res, "mlx5-0-p1")
			if v, ok := d.Attributes[tc.wantIBDev]; !ok || v.StringValue == nil || *v.StringValue != "mlx5_0" {
				t.Errorf("attribute %s = %+v, %v; want mlx5_0", tc.wantIBDev, v, ok)
			}
			if _, ok := d.Attributes[tc.wantStandard]; !ok {
				t.Errorf("standard attribute %s missing", tc.wantStandard)
			}
			if _, ok := d.Attributes["ibdev"]; ok == tc.wantNoShortKey {
				t.Errorf("short key ibdev present = %v, want %v", ok, !tc.wantNoShortKey)
			}
			// Consumers find it by the fully qualified name either way.
			if v, ok := LookupAttribute(tc.driver, &d, AttrIBDev); !ok || *v.StringValue != "mlx5_0" {
				t.Errorf("LookupAttribute(%s) = %+v, %v", AttrIBDev, v, ok)
			}
			// Capacities stay fully qualified: the allocator compares them literally.
			shared := device(t, res, "mlx5-0-p1-shared")
			if _, ok := shared.Capacity[SharesCapacity]; !ok {
				t.Errorf("capacity %s missing: %v", SharesCapacity, shared.Capacity)
			}
		})
	}
}

func TestLookupAttribute(t *testing.T) {
	str := func(s string) resourceapi.DeviceAttribute { return resourceapi.DeviceAttribute{StringValue: &s} }
	for _, tc := range []struct {
		name   string
		driver string
		attrs  map[resourceapi.QualifiedName]resourceapi.DeviceAttribute
		lookup resourceapi.QualifiedName
		want   string
	}{
		{"qualified", "rdma.dra.io", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"rdma.dra.io/ibdev": str("a")}, "rdma.dra.io/ibdev", "a"},
		{"short in the driver's domain", "rdma.dra.io", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"ibdev": str("b")}, "rdma.dra.io/ibdev", "b"},
		{"short of another driver", "other.io", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"ibdev": str("c")}, "rdma.dra.io/ibdev", ""},
		{"standard", "rdma.dra.io", map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"resource.kubernetes.io/pcieRoot": str("d")}, "resource.kubernetes.io/pcieRoot", "d"},
		{"missing", "rdma.dra.io", nil, "rdma.dra.io/ibdev", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, ok := LookupAttribute(tc.driver, &resourceapi.Device{Attributes: tc.attrs}, tc.lookup)
			if ok {
				if got := *v.StringValue; got != tc.want {
					t.Errorf("got %q, want %q", got, tc.want)
				}
			} else if tc.want != "" {
				t.Errorf("not found, want %q", tc.want)
			}
		})
	}
}

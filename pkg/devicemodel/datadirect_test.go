package devicemodel

import (
	"context"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// cx8Port is a ConnectX-8 port whose Data Direct function is on the GPU's root complex
// (pci0000:0b), while its PF is on pci0000:00, with dma-buf for GPUDirect RDMA.
func cx8Port() discovery.Port {
	p := ibPort("mlx5_0", 1)
	p.Model, p.DeviceID = "ConnectX-8", "1023"
	p.DataDirectBusID, p.DataDirectPCIeRoot = "0000:0b:00.1", "pci0000:0b"
	p.GPUDirect = discovery.GPUDirectDMABuf
	return p
}

func TestDataDirectAndGPUDirect(t *testing.T) {
	const (
		pcieRoot = deviceattribute.StandardDeviceAttributePCIeRoot
		pciBusID = deviceattribute.StandardDeviceAttributePCIBusID
	)
	virtual := ibPort("rxe0", 1)
	virtual.PCIBusID, virtual.PCIeRoot, virtual.Virtual, virtual.GPUDirect = "", "", true, discovery.GPUDirectPeermem
	garbled := cx8Port()
	garbled.DataDirectPCIeRoot = "pci0000:0B"
	peermem := ibPort("mlx5_0", 1)
	peermem.GPUDirect = discovery.GPUDirectPeermem
	tests := []struct {
		name string
		port discovery.Port
		// want are the values of the attributes below; "" is an attribute left out.
		want        map[resourceapi.QualifiedName]string
		wantOmitted []resourceapi.QualifiedName
	}{
		{name: "ConnectX-7: the PF's root, no Data Direct, no GPUDirect", port: ibPort("mlx5_0", 1),
			want: map[resourceapi.QualifiedName]string{pcieRoot: "pci0000:00", pciBusID: "0000:03:00.0", AttrNetdevPCIeRoot: "", AttrDataDirect: "", AttrGPUDirect: ""}},
		{name: "ConnectX-8 with Data Direct: its root pairs with the GPU, the PF's stays visible", port: cx8Port(),
			want: map[resourceapi.QualifiedName]string{pcieRoot: "pci0000:0b", pciBusID: "0000:03:00.0", AttrNetdevPCIeRoot: "pci0000:00", AttrDataDirect: "true", AttrGPUDirect: "dmabuf"}},
		{name: "peermem", port: peermem,
			want: map[resourceapi.QualifiedName]string{pcieRoot: "pci0000:00", AttrGPUDirect: "peermem"}},
		{name: "a Data Direct root in another form is left out, never replaced by the PF's", port: garbled,
			want:        map[resourceapi.QualifiedName]string{pcieRoot: "", AttrNetdevPCIeRoot: "pci0000:00", AttrDataDirect: "true"},
			wantOmitted: []resourceapi.QualifiedName{pcieRoot}},
		{name: "virtual device: no PCI attributes", port: virtual,
			want: map[resourceapi.QualifiedName]string{pcieRoot: "", pciBusID: "", AttrNetdevPCIeRoot: "", AttrDataDirect: "", AttrGPUDirect: "peermem"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Build(inventory(tt.port), Options{NodeName: "node-a"})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			key := DeviceName(tt.port.IBDev, tt.port.Port)
			for _, name := range []string{key, SharedDeviceName(key)} {
				d := device(t, res, name)
				got := map[resourceapi.QualifiedName]string{}
				for attr := range tt.want {
					got[attr] = ""
					if v, ok := lookupAttr(d, attr); ok {
						got[attr] = attrString(v)
					}
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("%s (-want +got):\n%s", name, diff)
				}
			}
			var omitted []resourceapi.QualifiedName
			for _, is := range res.Issues {
				omitted = append(omitted, is.Attribute)
			}
			if diff := cmp.Diff(tt.wantOmitted, omitted); diff != "" {
				t.Errorf("omitted (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGPUDirectSelectors evaluates the selectors a DeviceClass writes for GPUDirect RDMA
// with the allocator's CEL library, on the devices Build publishes. gpudirect and
// data_direct are left out where they do not apply, and the allocator fails the whole
// allocation on a selector that reads a missing attribute ("no such key"), so the
// selectors docs/device-model.md shows guard the lookup.
func TestGPUDirectSelectors(t *testing.T) {
	cx7 := ibPort("mlx5_1", 1)
	peermem := ibPort("mlx5_2", 1)
	peermem.GPUDirect = discovery.GPUDirectPeermem
	res, err := Build(inventory(cx8Port(), cx7, peermem), Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	compiler := dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})
	for _, tt := range []struct {
		expr       string
		want       []string // the exclusive devices it selects
		wantErrors []string // those it cannot be evaluated on
	}{
		{expr: `device.attributes["rdma.dra.io"].?gpudirect.orValue("") == "dmabuf"`, want: []string{"mlx5-0-p1"}},
		{expr: `device.attributes["rdma.dra.io"].?gpudirect.orValue("") in ["dmabuf", "peermem"]`, want: []string{"mlx5-0-p1", "mlx5-2-p1"}},
		{expr: `device.attributes["rdma.dra.io"].?data_direct.orValue(false)`, want: []string{"mlx5-0-p1"}},
		{expr: `device.attributes["rdma.dra.io"].gpudirect == "dmabuf"`, want: []string{"mlx5-0-p1"}, wantErrors: []string{"mlx5-1-p1"}},
	} {
		t.Run(tt.expr, func(t *testing.T) {
			c := compiler.CompileCELExpression(tt.expr, dracel.Options{})
			if c.Error != nil {
				t.Fatal(c.Error)
			}
			var got, errs []string
			for _, name := range []string{"mlx5-0-p1", "mlx5-1-p1", "mlx5-2-p1"} {
				d := device(t, res, name)
				ok, _, err := c.DeviceMatches(context.Background(), dracel.Device{Driver: DefaultDriverName, Attributes: d.Attributes, Capacity: d.Capacity})
				switch {
				case err != nil:
					errs = append(errs, name)
				case ok:
					got = append(got, name)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("selected (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantErrors, errs); diff != "" {
				t.Errorf("evaluation errors (-want +got):\n%s", diff)
			}
		})
	}
}

// attrString is an attribute's value as text.
func attrString(v resourceapi.DeviceAttribute) string {
	switch {
	case v.StringValue != nil:
		return *v.StringValue
	case v.BoolValue != nil:
		if *v.BoolValue {
			return "true"
		}
		return "false"
	case v.IntValue != nil:
		return strconv.FormatInt(*v.IntValue, 10)
	}
	return "?"
}

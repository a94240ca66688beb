package devicemodel

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// TestAttributeNamesAreInventoryKeys: the inventory document (discover -o json,
// docs/inventory.schema.json) names a port's facts with the attribute vocabulary, so an
// attribute of the driver's domain that is computed from a fact of discovery.Port has
// that fact's JSON key as its name, and no JSON key of the port names an attribute it
// does not feed. JSON keys are struct tags, which cannot be the constants themselves;
// this ties the two. Which fields an attribute depends on is found by changing one field
// of a port at a time.
//
// One attribute is named otherwise on purpose, and listed here: netdev_pcie_root is the
// inventory's pcie_root, published under that name where the standard pcieRoot names the
// root of the adapter's Data Direct function instead (data_direct_pcie_root). The rail
// comes from the node configuration, not from the inventory.
func TestAttributeNamesAreInventoryKeys(t *testing.T) {
	renamed := map[resourceapi.QualifiedName]string{AttrNetdevPCIeRoot: "pcie_root"}
	base := discovery.Port{
		IBDev: "mlx5_bond_0", Port: 1, LinkLayer: discovery.LinkLayerEthernet, State: "ACTIVE", PhysState: "LinkUp",
		SpeedGbps: ptr.To(200), Rate: "200 Gb/sec (4X HDR)", Netdev: "bond0", MTU: ptr.To(9000), NetdevOperState: "up",
		PortGUID: "ba3f:d2ff:fe00:0010", GIDIndex: ptr.To(3), NodeGUID: "ba3f:d2ff:fe00:0010", FWVer: "22.39.1002",
		BoardID: "MT_0000000359", HCAType: "MT4125", Model: "ConnectX-6 Dx", VendorID: "15b3", DeviceID: "101d",
		Driver: "mlx5_core", PCIBusID: "0000:04:00.0", PCIeRoot: "pci0000:00", NUMANode: ptr.To(1), LAG: true,
		DataDirectBusID: "0000:0b:00.1", DataDirectPCIeRoot: "pci0000:0b", GPUDirect: discovery.GPUDirectDMABuf,
		Verbs: &discovery.CharDev{Name: "uverbs1", Major: 231, Minor: 193},
	}
	attrsOf := func(p *discovery.Port) map[resourceapi.QualifiedName]resourceapi.DeviceAttribute {
		// A changed value may lose its standard form and be omitted: that is a change too.
		attrs, _ := portAttributes(attrInput{port: p, mode: ModeExclusive, netns: discovery.NetnsModeShared, rail: ptr.To(0)})
		return attrs
	}
	want := attrsOf(&base)
	if len(want) != len(Attributes()) {
		t.Fatalf("the test port has %d of the %d attributes", len(want), len(Attributes()))
	}

	keys := map[string]bool{}                           // the port's JSON keys
	sources := map[resourceapi.QualifiedName][]string{} // attribute -> JSON keys of the fields it depends on
	pt := reflect.TypeFor[discovery.Port]()
	for i := range pt.NumField() {
		key, _, _ := strings.Cut(pt.Field(i).Tag.Get("json"), ",")
		keys[key] = true
		p := base
		if !change(reflect.ValueOf(&p).Elem().Field(i)) {
			t.Fatalf("the test cannot change field %s", pt.Field(i).Name)
		}
		got := attrsOf(&p)
		for _, a := range Attributes() {
			g, gok := got[a.Name]
			w, wok := want[a.Name]
			if gok != wok || !reflect.DeepEqual(g, w) {
				sources[a.Name] = append(sources[a.Name], key)
			}
		}
	}
	for _, a := range Attributes() {
		domain, name, _ := strings.Cut(string(a.Name), "/")
		if domain != AttributeDomain {
			continue // standard attributes have the names Kubernetes gives them
		}
		t.Run(name, func(t *testing.T) {
			src := sources[a.Name]
			if key, ok := renamed[a.Name]; ok {
				if !slices.Contains(src, key) {
					t.Errorf("listed as the inventory's %s under another name, but computed from %v", key, src)
				}
				return
			}
			switch {
			case len(src) > 0 && !slices.Contains(src, name):
				t.Errorf("computed from the inventory's %v, none of which is named %s", src, name)
			case len(src) == 0 && keys[name]:
				t.Errorf("the inventory's key %s does not feed the attribute of that name", name)
			}
		})
	}
}

// change sets v to another value of its type and reports whether it could.
func change(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
	case reflect.Int:
		v.SetInt(v.Int() + 1)
	case reflect.Bool:
		v.SetBool(!v.Bool())
	case reflect.Pointer:
		if v.IsNil() || v.Elem().Kind() == reflect.Struct {
			v.SetZero()
			return true
		}
		n := reflect.New(v.Type().Elem())
		n.Elem().Set(v.Elem())
		v.Set(n)
		return change(n.Elem())
	default:
		return false
	}
	return true
}

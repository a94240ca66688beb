package v1alpha1

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/randfill"
)

// TestPoolDeepCopy fills every field at random, copies, and checks that the copy is
// equal and shares no memory: a field added without a deep copy fails here.
func TestPoolDeepCopy(t *testing.T) {
	f := randfill.NewWithSeed(1).NilChance(0).NumElements(1, 3).Funcs(
		// The API decodes a config into Raw only; Object stays nil.
		func(r *runtime.RawExtension, c randfill.Continue) { r.Raw = []byte(`{"x":"` + c.String(8) + `"}`) })
	for range 20 {
		orig := &RdmaPool{}
		f.Fill(orig)
		cp := orig.DeepCopyObject().(*RdmaPool)
		if diff := cmp.Diff(orig, cp); diff != "" {
			t.Fatalf("copy differs (-orig +copy):\n%s", diff)
		}
		if shared := sharedMemory(reflect.ValueOf(orig).Elem(), reflect.ValueOf(cp).Elem(), "pool"); len(shared) > 0 {
			t.Fatalf("copy shares memory with the original at %v", shared)
		}
	}
	list := &RdmaPoolList{Items: []RdmaPool{{}}}
	if cp := list.DeepCopyObject().(*RdmaPoolList); len(cp.Items) != 1 || &cp.Items[0] == &list.Items[0] {
		t.Error("list copy shares items")
	}
	if (*RdmaPool)(nil).DeepCopy() != nil || (*RdmaPoolList)(nil).DeepCopy() != nil {
		t.Error("nil.DeepCopy() != nil")
	}
}

func TestPoolValidate(t *testing.T) {
	valid := func() *RdmaPool {
		p := &RdmaPool{Spec: RdmaPoolSpec{Mode: PoolModeShared}}
		p.Name = "rdma-shared"
		return p
	}
	// legacy turns the valid pool into a legacy one before f changes it.
	legacy := func(f func(*RdmaPool)) func(*RdmaPool) {
		return func(p *RdmaPool) {
			p.Name, p.Spec.Mode = "hca-shared-devices-a", PoolModeLegacy
			if f != nil {
				f(p)
			}
		}
	}
	config := func(fields string) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig",` + fields + `}`)}
	}
	tests := []struct {
		name   string
		mutate func(*RdmaPool)
		want   string
	}{
		{"valid", func(*RdmaPool) {}, ""},
		{"bad name", func(p *RdmaPool) { p.Name = "Rdma_Shared" }, "metadata.name: Invalid value"},
		{"bad mode", func(p *RdmaPool) { p.Spec.Mode = "both" }, `spec.mode: Unsupported value: "both"`},
		{"bad vendor", func(p *RdmaPool) { p.Spec.Selectors.Vendors = []string{"15b"} }, "spec.selectors.vendors[0]: Invalid value"},
		{"vendor with 0x", func(p *RdmaPool) { p.Spec.Selectors.Vendors = []string{"0x15B3"} }, ""},
		{"bad pattern", func(p *RdmaPool) { p.Spec.Selectors.IfNames = []string{"ib[0-"} }, "spec.selectors.ifNames[0]: Invalid value"},
		{"non-ASCII", func(p *RdmaPool) { p.Spec.Selectors.IBDevs = []string{"mlx5_é"} }, "must be printable ASCII"},
		{"empty value", func(p *RdmaPool) { p.Spec.Selectors.Drivers = []string{""} }, "spec.selectors.drivers[0]: Required value"},
		{"bad link type", func(p *RdmaPool) { p.Spec.Selectors.LinkTypes = []LinkType{"fddi"} }, "spec.selectors.linkTypes[0]: Unsupported value"},
		{"link type in a case the CRD refuses", func(p *RdmaPool) { p.Spec.Selectors.LinkTypes = []LinkType{"Infiniband"} }, "spec.selectors.linkTypes[0]: Unsupported value"},
		{"extended resource without domain", func(p *RdmaPool) { p.Spec.ExtendedResourceName = new("hca") }, "must be <domain>/<name>"},
		{"extended resource of kubernetes.io", func(p *RdmaPool) { p.Spec.ExtendedResourceName = new("kubernetes.io/hca") }, "kubernetes.io domain"},
		{"long CEL", func(p *RdmaPool) { p.Spec.CEL = strings.Repeat("x", MaxCELLength+1) }, "spec.cel: Too long"},

		{"legacy", legacy(nil), ""},
		{"legacy with CEL and extended resource", legacy(func(p *RdmaPool) {
			p.Spec.CEL = `device.attributes["rdma.dra.io"].ports >= 8`
			p.Spec.ExtendedResourceName = new("rdma/hca_shared_devices_a")
		}), ""},
		{"legacy name of 56 characters", legacy(func(p *RdmaPool) { p.Name = strings.Repeat("a", 56) }), ""},
		{"legacy name of 57 characters", legacy(func(p *RdmaPool) { p.Name = strings.Repeat("a", 57) }),
			"metadata.name: Invalid value: \"" + strings.Repeat("a", 57) + "\": " + legacyNameMessage},
		{"legacy name with a dot", legacy(func(p *RdmaPool) { p.Name = "hca.shared" }),
			`metadata.name: Invalid value: "hca.shared": must be a DNS label of at most 56 characters in legacy mode`},
		{"dotted name in shared mode", func(p *RdmaPool) { p.Name = "hca.shared" }, ""},
		{"legacy with a selector", legacy(func(p *RdmaPool) { p.Spec.Selectors.LinkTypes = []LinkType{"IB"} }),
			"spec.selectors: Forbidden: " + legacySelectorsMessage},
		{"legacy with a minimum speed", legacy(func(p *RdmaPool) { p.Spec.Selectors.MinSpeedGbps = new(int32(200)) }),
			"spec.selectors: Forbidden: must be empty in legacy mode"},
		{"legacy with minimum speed 0", legacy(func(p *RdmaPool) { p.Spec.Selectors.MinSpeedGbps = new(int32(0)) }), ""},
		{"legacy with empty lists", legacy(func(p *RdmaPool) { p.Spec.Selectors.IBDevs = []string{} }), ""},
		{"legacy config without network", legacy(func(p *RdmaPool) {
			p.Spec.Config = config(`"allowedCharDevices":"verbs","memlock":"unlimited"`)
		}), ""},
		{"legacy config with network", legacy(func(p *RdmaPool) { p.Spec.Config = config(`"network":{"mode":"macvlan"}`) }),
			"spec.config.network: Forbidden: " + legacyNetworkMessage},
		{"legacy config with network mode none", legacy(func(p *RdmaPool) { p.Spec.Config = config(`"network":{"mode":"none"}`) }),
			"spec.config.network: Forbidden: must not be set in legacy mode"},
		{"legacy config that lets claims attach", legacy(func(p *RdmaPool) { p.Spec.Config = config(`"allowedNetwork":{"modes":["ipoib"]}`) }),
			"spec.config.allowedNetwork: Forbidden: must not be set in legacy mode"},
		{"legacy config with network and another error", legacy(func(p *RdmaPool) {
			p.Spec.Config = config(`"gidIndex":300,"network":{"mode":"move"}`)
		}), `spec.config.network: Forbidden`},
		{"network in shared mode", func(p *RdmaPool) { p.Spec.Config = config(`"network":{"mode":"macvlan"}`) }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := valid()
			tt.mutate(p)
			got := ""
			if errs := p.Validate(); len(errs) > 0 {
				got = errs.ToAggregate().Error()
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestLegacyDeviceName: the device of the longest legacy pool name is a DNS label of the
// longest length, and one character more is not.
func TestLegacyDeviceName(t *testing.T) {
	tests := []struct {
		pool  string
		valid bool
	}{
		{"hca-shared-devices-a", true},
		{strings.Repeat("a", MaxLegacyPoolNameLength), true},
		{strings.Repeat("a", MaxLegacyPoolNameLength+1), false},
	}
	for _, tt := range tests {
		t.Run(tt.pool, func(t *testing.T) {
			name := LegacyDeviceName(tt.pool)
			if name != "legacy-"+tt.pool {
				t.Errorf("LegacyDeviceName(%q) = %q", tt.pool, name)
			}
			if msgs := validation.IsDNS1123Label(name); (len(msgs) == 0) != tt.valid {
				t.Errorf("%q as a DNS label: %v, want valid %v", name, msgs, tt.valid)
			}
		})
	}
}

// sharedMemory lists the paths where a and b hold the same pointer, slice array or map.
func sharedMemory(a, b reflect.Value, path string) []string {
	var out []string
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return nil
		}
		if a.Pointer() == b.Pointer() {
			return []string{path}
		}
		return sharedMemory(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			return []string{path}
		}
		for i := 0; i < min(a.Len(), b.Len()); i++ {
			out = append(out, sharedMemory(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i))...)
		}
	case reflect.Map:
		if a.Len() > 0 && a.Pointer() == b.Pointer() {
			return []string{path}
		}
	case reflect.Struct:
		if a.Type() == reflect.TypeFor[time.Time]() {
			return nil // its *Location is immutable and shared by design
		}
		for i := range a.NumField() {
			out = append(out, sharedMemory(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name)...)
		}
	}
	return out
}

// TestLinkLayer: every spelling of LinkTypes names its link layer, and nothing else does,
// not even another case of one of them (the CRD's enum refuses those).
func TestLinkLayer(t *testing.T) {
	want := map[LinkType]string{"InfiniBand": "InfiniBand", "infiniband": "InfiniBand", "IB": "InfiniBand", "ib": "InfiniBand",
		"Ethernet": "Ethernet", "ethernet": "Ethernet", "ETH": "Ethernet", "eth": "Ethernet", "ether": "Ethernet"}
	if len(want) != len(LinkTypes) {
		t.Fatalf("LinkTypes has %d spellings, the test knows %d: %v", len(LinkTypes), len(want), LinkTypes)
	}
	for _, lt := range LinkTypes {
		if got, ok := lt.LinkLayer(); !ok || got != want[lt] {
			t.Errorf("%q.LinkLayer() = %q, %v; want %q", lt, got, ok, want[lt])
		}
	}
	for _, lt := range []LinkType{"", "Infiniband", "INFINIBAND", "Ib", "iB", "ETHERNET", "Eth", "Ether", "ETHER", "roce", " ib"} {
		if got, ok := lt.LinkLayer(); ok {
			t.Errorf("%q.LinkLayer() = %q, true; want refused", lt, got)
		}
	}
}

package deployments

import (
	"context"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// celCompiler is the allocator's CEL compiler with the features of Kubernetes 1.36+.
var celCompiler = dracel.GetCompiler(dracel.Features{EnableConsumableCapacity: true})

// sampleInventory is a node with one InfiniBand port, one RoCE port and a LAG device.
func sampleInventory() *discovery.Inventory {
	return &discovery.Inventory{
		NetnsMode: discovery.NetnsModeShared,
		Ports: []discovery.Port{
			{IBDev: "mlx5_0", Port: 1, LinkLayer: discovery.LinkLayerInfiniBand, State: "ACTIVE", PhysState: "LinkUp",
				SpeedGbps: ptr.To(400), Netdev: "ibp3s0", NUMANode: ptr.To(0), VendorID: "15b3", DeviceID: "1021",
				Driver: "mlx5_core", PCIBusID: "0000:03:00.0", PCIeRoot: "pci0000:00"},
			{IBDev: "mlx5_1", Port: 1, LinkLayer: discovery.LinkLayerEthernet, State: "ACTIVE", PhysState: "LinkUp",
				SpeedGbps: ptr.To(200), Netdev: "enp4s0f0np0", GIDIndex: ptr.To(3), NUMANode: ptr.To(1), VendorID: "15b3",
				DeviceID: "101d", Driver: "mlx5_core", PCIBusID: "0000:41:00.0", PCIeRoot: "pci0000:40"},
			{IBDev: "mlx5_bond_0", Port: 1, LinkLayer: discovery.LinkLayerEthernet, State: "DOWN", PhysState: "Disabled",
				Netdev: "bond0", LAG: true, VendorID: "15b3", DeviceID: "101d", Driver: "mlx5_core"},
		},
	}
}

// deviceModel is one shape the plugin publishes: partitionable, or legacy with the port
// published either whole or as single shares; the partitionable one also with the device
// of a legacy resource (legacyResources of the node configuration) for every port.
type deviceModel struct {
	name            string
	legacy          bool
	legacyMode      nodeconfig.LegacyMode
	legacyResources []nodeconfig.LegacyResource
}

// sampleLegacyResource is the legacy resource of the model that has one: every port.
const sampleLegacyResource = "hca-shared-devices-a"

var deviceModels = []deviceModel{
	{name: "partitionable"},
	{name: "partitionable-legacy-resource", legacyResources: []nodeconfig.LegacyResource{{Name: sampleLegacyResource, MaxPods: 10}}},
	{name: "legacy-shared", legacy: true, legacyMode: nodeconfig.LegacyModeShared},
	{name: "legacy-exclusive", legacy: true, legacyMode: nodeconfig.LegacyModeExclusive},
}

// sampleDevice is a published device with what a DeviceClass selector sees of it.
type sampleDevice struct {
	name string
	mode devicemodel.Mode
	cel  dracel.Device
}

// sampleDevices builds the devices of sampleInventory with the driver's own device model,
// in the partitionable or the legacy shape, plus a foreign driver's device that claims
// to be a shared RDMA port: only the driver check keeps it out.
func sampleDevices(t *testing.T, model deviceModel) []sampleDevice {
	t.Helper()
	opts := devicemodel.Options{NodeName: "node-a", Legacy: model.legacy}
	opts.Config.Legacy.Mode = model.legacyMode
	opts.Config.LegacyResources = model.legacyResources
	opts.Config.SetDefaults()
	res, err := devicemodel.Build(sampleInventory(), opts)
	if err != nil {
		t.Fatalf("build device model: %v", err)
	}
	var out []sampleDevice
	for _, pool := range res.Resources.Pools {
		for _, s := range pool.Slices {
			for _, d := range s.Devices {
				out = append(out, sampleDevice{name: d.Name, mode: res.Devices[d.Name].Mode, cel: dracel.Device{
					Driver: res.DriverName, AllowMultipleAllocations: d.AllowMultipleAllocations,
					Attributes: d.Attributes, Capacity: d.Capacity,
				}})
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("the device model published no devices")
	}
	shared := "shared"
	out = append(out, sampleDevice{name: "foreign", cel: dracel.Device{Driver: "gpu.example.com",
		Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{"rdma.dra.io/mode": {StringValue: &shared}}}})
	return out
}

// poolClasses returns the DeviceClasses the controller writes for the file's RdmaPools,
// with the CEL from the controller's own generator.
func poolClasses(t *testing.T, file string) []*resourceapi.DeviceClass {
	t.Helper()
	var out []*resourceapi.DeviceClass
	for _, p := range only[*v1alpha1.RdmaPool](decodeFile(t, file)) {
		if errs := p.Validate(); len(errs) > 0 {
			t.Fatalf("RdmaPool %s: %v", p.Name, errs.ToAggregate())
		}
		expr, err := controller.ClassCEL(devicemodel.DefaultDriverName, p)
		if err != nil {
			t.Fatalf("RdmaPool %s: %v", p.Name, err)
		}
		if _, err := controller.CompileSelector(expr); err != nil {
			t.Fatalf("RdmaPool %s: %v", p.Name, err)
		}
		out = append(out, &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: resourceapi.DeviceClassSpec{
			Selectors:            []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}},
			ExtendedResourceName: p.Spec.ExtendedResourceName,
		}})
	}
	return out
}

// TestDefaultPoolSelectors evaluates the CEL of the default pools' DeviceClasses with the
// allocator's compiler on devices built by pkg/devicemodel: a class selects exactly the
// driver's devices of its mode, in both device models.
func TestDefaultPoolSelectors(t *testing.T) {
	wantMode := map[string]devicemodel.Mode{"rdma-shared": devicemodel.ModeShared, "rdma-exclusive": devicemodel.ModeExclusive}
	for _, file := range staticFiles {
		classes := poolClasses(t, file)
		if got := len(classes); got != len(wantMode) {
			t.Fatalf("%s: %d RdmaPools, want %d", file, got, len(wantMode))
		}
		for _, class := range classes {
			mode, ok := wantMode[class.Name]
			if !ok {
				t.Fatalf("unexpected RdmaPool %s", class.Name)
			}
			for _, model := range deviceModels {
				t.Run(filepath.Base(file)+"/"+class.Name+"/"+model.name, func(t *testing.T) {
					devices := sampleDevices(t, model)
					var want, got []string
					for _, d := range devices {
						if d.cel.Driver == devicemodel.DefaultDriverName && d.mode == mode {
							want = append(want, d.name)
						}
						if selects(t, class, d.cel) {
							got = append(got, d.name)
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("selects %v, want %v", got, want)
					}
					// The partitionable model has both modes of every port: a class
					// that selects nothing there is broken, not empty.
					if !model.legacy && len(want) == 0 {
						t.Errorf("no %s device in the partitionable model", mode)
					}
				})
			}
		}
	}
}

// TestLegacyPoolSelector evaluates the CEL of a legacy pool's DeviceClass on every
// device model: it selects the device of its legacy resource, where the node publishes
// one, and nothing else; a legacy pool of another name selects nothing.
func TestLegacyPoolSelector(t *testing.T) {
	pool := func(name string) *v1alpha1.RdmaPool {
		return &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy}}
	}
	for _, p := range []*v1alpha1.RdmaPool{pool(sampleLegacyResource), pool("hca-shared-devices-b")} {
		if errs := p.Validate(); len(errs) > 0 {
			t.Fatalf("RdmaPool %s: %v", p.Name, errs.ToAggregate())
		}
		expr, err := controller.ClassCEL(devicemodel.DefaultDriverName, p)
		if err != nil {
			t.Fatalf("RdmaPool %s: %v", p.Name, err)
		}
		class := &resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: resourceapi.DeviceClassSpec{
			Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: expr}}}}}
		attrs, caps := celNames(expr)
		checkNames(t, "DeviceClass "+p.Name, attrs, caps)
		for _, model := range deviceModels {
			t.Run(p.Name+"/"+model.name, func(t *testing.T) {
				var want, got []string
				if p.Name == sampleLegacyResource && len(model.legacyResources) > 0 {
					want = []string{v1alpha1.LegacyDeviceName(p.Name)}
				}
				for _, d := range sampleDevices(t, model) {
					if selects(t, class, d.cel) {
						got = append(got, d.name)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("selects %v, want %v", got, want)
				}
			})
		}
	}
}

func selects(t *testing.T, class *resourceapi.DeviceClass, d dracel.Device) bool {
	t.Helper()
	if len(class.Spec.Selectors) == 0 {
		t.Fatalf("DeviceClass %s has no selector", class.Name)
	}
	for _, s := range class.Spec.Selectors {
		if s.CEL == nil {
			t.Fatalf("DeviceClass %s: selector without CEL", class.Name)
		}
		if !celMatches(t, s.CEL.Expression, d) {
			return false
		}
	}
	return true
}

func celMatches(t *testing.T, expr string, d dracel.Device) bool {
	t.Helper()
	res := celCompiler.CompileCELExpression(expr, dracel.Options{})
	if res.Error != nil {
		t.Fatalf("compile %q: %v", expr, res.Error)
	}
	ok, _, err := res.DeviceMatches(context.Background(), d)
	if err != nil {
		t.Fatalf("evaluate %q on %s: %v", expr, d.Driver, err)
	}
	return ok
}

func TestDefaultPoolExtendedResources(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			got := map[string]string{}
			for _, c := range poolClasses(t, file) {
				got[c.Name] = ptr.Deref(c.Spec.ExtendedResourceName, "")
			}
			// The device plugin's resource name is left to the migrated pools
			// (docs/migration.md): the default pools select every port.
			want := map[string]string{"rdma-shared": "", "rdma-exclusive": ""}
			for name, w := range want {
				if got[name] != w {
					t.Errorf("RdmaPool %s: extendedResourceName %q, want %q", name, got[name], w)
				}
			}
		})
	}
}

// celNameRE finds the qualified names a CEL expression reads: device.attributes["d"].n,
// device.attributes["d"]["n"] and the same for device.capacity.
var celNameRE = regexp.MustCompile(`device\.(attributes|capacity)\["([^"]+)"\](?:\.([a-zA-Z_][a-zA-Z0-9_]*)|\["([^"]+)"\])`)

// celNames returns the fully qualified attribute and capacity names expr reads.
func celNames(expr string) (attrs, capacities []string) {
	for _, m := range celNameRE.FindAllStringSubmatch(expr, -1) {
		name := m[2] + "/" + m[3] + m[4]
		if m[1] == "attributes" {
			attrs = append(attrs, name)
		} else {
			capacities = append(capacities, name)
		}
	}
	return attrs, capacities
}

// knownNames are the attribute and capacity names the driver publishes, from its device
// model: the one list CEL in the chart, the demos and the docs must use.
func knownNames() (attrs, capacities sets.Set[string]) {
	attrs = sets.New[string]()
	for _, a := range append(devicemodel.Attributes(), devicemodel.LegacyAttributes()...) {
		attrs.Insert(string(a.Name))
	}
	return attrs, sets.New(string(devicemodel.SharesCapacity))
}

// checkNames fails for every name of the driver's domains (rdma.dra.io and the standard
// resource.kubernetes.io) that the device model does not publish; other drivers' names
// are theirs to check.
func checkNames(t *testing.T, where string, attrs, capacities []string) {
	t.Helper()
	knownAttrs, knownCaps := knownNames()
	ours := func(name string) bool {
		d, _, _ := cutDomain(name)
		return d == devicemodel.AttributeDomain || d == "resource.kubernetes.io"
	}
	for _, a := range attrs {
		if ours(a) && !knownAttrs.Has(a) {
			t.Errorf("%s: attribute %s is not one the device model publishes", where, a)
		}
	}
	for _, c := range capacities {
		if ours(c) && !knownCaps.Has(c) {
			t.Errorf("%s: capacity %s is not one the device model publishes", where, c)
		}
	}
}

func cutDomain(name string) (domain, id string, ok bool) {
	i := len(name) - 1
	for i >= 0 && name[i] != '/' {
		i--
	}
	if i < 0 {
		return "", name, false
	}
	return name[:i], name[i+1:], true
}

func TestDefaultPoolAttributeNames(t *testing.T) {
	for _, file := range staticFiles {
		for _, c := range poolClasses(t, file) {
			for _, s := range c.Spec.Selectors {
				attrs, caps := celNames(s.CEL.Expression)
				if len(attrs) == 0 {
					t.Errorf("DeviceClass %s: no attribute found in %q", c.Name, s.CEL.Expression)
				}
				checkNames(t, "DeviceClass "+c.Name, attrs, caps)
			}
		}
	}
}

func TestCELNames(t *testing.T) {
	tests := []struct {
		expr             string
		wantAttrs, wantC []string
	}{
		{`device.attributes["rdma.dra.io"].mode == "shared"`, []string{"rdma.dra.io/mode"}, nil},
		{`device.attributes["rdma.dra.io"]["link_layer"] == "x" && device.capacity["rdma.dra.io"].shares.compareTo(quantity("1")) >= 0`,
			[]string{"rdma.dra.io/link_layer"}, []string{"rdma.dra.io/shares"}},
		{`device.attributes["resource.kubernetes.io"].pcieRoot == "pci0000:00"`, []string{"resource.kubernetes.io/pcieRoot"}, nil},
		{`device.driver == "rdma.dra.io"`, nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			attrs, caps := celNames(tt.expr)
			if !slices.Equal(attrs, tt.wantAttrs) || !slices.Equal(caps, tt.wantC) {
				t.Errorf("got %v %v, want %v %v", attrs, caps, tt.wantAttrs, tt.wantC)
			}
		})
	}
}

func dracelOptions() dracel.Options { return dracel.Options{} }

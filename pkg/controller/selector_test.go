package controller

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// selected compiles the pool's CEL like the controller does and evaluates it on every
// device of the profile, plus a foreign driver's device that claims every attribute.
func selected(t *testing.T, profile string, legacy bool, spec v1alpha1.RdmaPoolSpec) []string {
	t.Helper()
	expr, err := PoolCEL(devicemodel.DefaultDriverName, &spec)
	if err != nil {
		t.Fatalf("PoolCEL: %v", err)
	}
	prog, err := CompileSelector(expr)
	if err != nil {
		t.Fatalf("compile %s: %v", expr, err)
	}
	var got []string
	for _, s := range profileSlices(t, profile, "node-a", legacy) {
		for i := range s.Spec.Devices {
			d := &s.Spec.Devices[i]
			match(t, prog, celDevice(s.Spec.Driver, d), d.Name, &got)
			// The same device from another driver must never match.
			var none []string
			match(t, prog, celDevice("gpu.example.com", d), d.Name, &none)
			if len(none) > 0 {
				t.Errorf("%s selects device %s of another driver", expr, d.Name)
			}
		}
	}
	slices.Sort(got)
	return got
}

func match(t *testing.T, prog dracel.CompilationResult, d dracel.Device, name string, into *[]string) {
	t.Helper()
	ok, _, err := prog.DeviceMatches(context.Background(), d)
	if err != nil {
		// A runtime error fails the whole allocation in the scheduler: never acceptable.
		t.Fatalf("evaluate %s on %s: %v", prog.Expression, name, err)
	}
	if ok {
		*into = append(*into, name)
	}
}

func ports(names ...string) []string {
	slices.Sort(names)
	return names
}

func shared(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = devicemodel.SharedDeviceName(n)
	}
	return ports(out...)
}

func TestPoolCELSelectsExactly(t *testing.T) {
	dgxIB := []string{"mlx5-0-p1", "mlx5-1-p1", "mlx5-2-p1", "mlx5-3-p1", "mlx5-4-p1", "mlx5-5-p1", "mlx5-6-p1", "mlx5-7-p1"}
	exclusive, sharedMode := v1alpha1.PoolModeExclusive, v1alpha1.PoolModeShared
	tests := []struct {
		name    string
		profile string
		legacy  bool
		spec    v1alpha1.RdmaPoolSpec
		want    []string
	}{
		{name: "linkTypes IB shared", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"IB"}}},
			want: shared(dgxIB...)},
		{name: "no selectors exclusive, a DOWN port included", profile: "disabled-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive},
			want: ports("mlx5-0-p1", "mlx5-1-p1", "mlx5-2-p1", "mlx5-3-p1")},
		{name: "linkTypes ether", profile: "vpi-dual-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"ether"}}},
			want: ports("mlx4-0-p2")},
		{name: "linkTypes both spellings", profile: "vpi-dual-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"ETH", "infiniband"}}},
			want: ports("mlx4-0-p1", "mlx4-0-p2")},
		{name: "vendors with 0x and upper case", profile: "vpi-dual-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{Vendors: []string{"0x15B3"}}},
			want: shared("mlx4-0-p1", "mlx4-0-p2")},
		{name: "vendors of another vendor", profile: "intel-e810",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{Vendors: []string{"15b3"}}}},
		{name: "deviceIDs", profile: "mixed-bond",
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{DeviceIDs: []string{"101D"}}},
			want: shared("mlx5-4-p1", "mlx5-5-p1")},
		{name: "drivers", profile: "broadcom",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{Drivers: []string{"bnxt_en"}}},
			want: ports("bnxt-re0-p1", "bnxt-re1-p1")},
		{name: "ifNames pattern", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IfNames: []string{"ibp*s0"}}},
			want: ports(dgxIB...)},
		{name: "ifNames exact and pattern", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IfNames: []string{"enp168s0f1np1", "ibp2?*"}}},
			want: ports("mlx5-0-p1", "mlx5-6-p1", "mlx5-7-p1", "mlx5-9-p1")},
		{name: "ifNames class", profile: "roce-lag",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IfNames: []string{"bond[0-3]"}}},
			want: ports("mlx5-bond-0-p1", "mlx5-bond-1-p1", "mlx5-bond-2-p1", "mlx5-bond-3-p1")},
		{name: "ifNames negated class", profile: "roce-lag",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IfNames: []string{"bond[^0-6]"}}},
			want: ports("mlx5-bond-7-p1")},
		{name: "ifNames shared bond", profile: "mixed-bond",
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{IfNames: []string{"bond0"}}},
			want: shared("mlx5-4-p1", "mlx5-5-p1")},
		{name: "ibdevs pattern with underscore", profile: "roce-lag",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IBDevs: []string{"mlx5_bond_[4-7]"}}},
			want: ports("mlx5-bond-4-p1", "mlx5-bond-5-p1", "mlx5-bond-6-p1", "mlx5-bond-7-p1")},
		{name: "ibdevs ? is one character", profile: "roce-lag",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{IBDevs: []string{"mlx5_?"}}}},
		{name: "pciAddresses pattern in upper case", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{PCIAddresses: []string{"0000:A8:00.*"}}},
			want: ports("mlx5-8-p1", "mlx5-9-p1")},
		{name: "pciAddresses exact, dot is literal", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{PCIAddresses: []string{"0000:18:00.0", "0000:40:00?0"}}},
			want: ports("mlx5-0-p1", "mlx5-1-p1")},
		{name: "pciAddresses on a device without PCI", profile: "soft-roce",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{PCIAddresses: []string{"*"}}}},
		{name: "no selectors on a device without PCI", profile: "soft-roce",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive},
			want: ports("rxe0-p1")},
		{name: "minSpeedGbps", profile: "disabled-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{MinSpeedGbps: ptr.To[int32](400)}},
			want: ports("mlx5-0-p1", "mlx5-1-p1", "mlx5-3-p1")},
		{name: "minSpeedGbps 0 is any speed", profile: "disabled-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{MinSpeedGbps: ptr.To[int32](0)}},
			want: ports("mlx5-0-p1", "mlx5-1-p1", "mlx5-2-p1", "mlx5-3-p1")},
		{name: "cel", profile: "vpi-dual-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, CEL: `device.attributes["rdma.dra.io"].port == 2`},
			want: ports("mlx4-0-p2")},
		{name: "cel with || stays inside its parentheses", profile: "vpi-dual-port",
			spec: v1alpha1.RdmaPoolSpec{Mode: exclusive, Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"IB"}},
				CEL: "true || false // a comment"},
			want: ports("mlx4-0-p1")},
		{name: "every selector at once", profile: "dgx-h100",
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{
				Vendors: []string{"15b3"}, DeviceIDs: []string{"1021"}, Drivers: []string{"mlx5_core"},
				IfNames: []string{"ibp*"}, IBDevs: []string{"mlx5_[0-3]"}, LinkTypes: []v1alpha1.LinkType{"InfiniBand"},
				PCIAddresses: []string{"0000:*"}, MinSpeedGbps: ptr.To[int32](200)}},
			want: shared("mlx5-0-p1", "mlx5-1-p1", "mlx5-2-p1", "mlx5-3-p1")},
		{name: "legacy single-share devices", profile: "vpi-dual-port", legacy: true,
			spec: v1alpha1.RdmaPoolSpec{Mode: sharedMode, Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"IB"}}},
			want: ports("mlx4-0-p1-s0", "mlx4-0-p1-s1")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := selected(t, tt.profile, tt.legacy, tt.spec)
			if !slices.Equal(got, tt.want) {
				t.Errorf("selects %v\nwant %v", got, tt.want)
			}
		})
	}
}

// TestClassCELLegacy evaluates the selector of legacy pools on a node of the dgx-h100
// profile that publishes the devices of two legacy pools besides its port devices, in
// both device models: a legacy pool selects its own device and nothing else.
func TestClassCELLegacy(t *testing.T) {
	legacyPool := func(name, cel string) *v1alpha1.RdmaPool {
		return &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy, CEL: cel}}
	}
	// A device that says mode legacy without naming a pool must not make the selector
	// fail (a runtime error fails the allocation).
	unnamed := legacyDevice("x", 1, 1)
	unnamed.Name = "legacy-unnamed"
	delete(unnamed.Attributes, "legacy_resource")
	devices := []resourceapi.Device{legacyDevice("hca-shared-devices-a", 8, 1000), legacyDevice("hca-shared-devices-b", 2, 10), unnamed}
	tests := []struct {
		name string
		pool *v1alpha1.RdmaPool
		want []string
	}{
		{"its own device", legacyPool("hca-shared-devices-a", ""), []string{"legacy-hca-shared-devices-a"}},
		{"the other pool's", legacyPool("hca-shared-devices-b", ""), []string{"legacy-hca-shared-devices-b"}},
		{"no device of its name", legacyPool("hca-shared-devices-c", ""), nil},
		{"a name that is a prefix of another", legacyPool("hca-shared-devices", ""), nil},
		{"cel ANDed", legacyPool("hca-shared-devices-a", `device.attributes["rdma.dra.io"].ports >= 8`), []string{"legacy-hca-shared-devices-a"}},
		{"cel that excludes it", legacyPool("hca-shared-devices-b", `device.attributes["rdma.dra.io"].ports >= 8`), nil},
		{"cel on capacity", legacyPool("hca-shared-devices-b", `device.capacity["rdma.dra.io"].shares.compareTo(quantity("10")) >= 0`),
			[]string{"legacy-hca-shared-devices-b"}},
	}
	for _, tt := range tests {
		for _, legacy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/legacy model %v", tt.name, legacy), func(t *testing.T) {
				expr, err := ClassCEL(devicemodel.DefaultDriverName, tt.pool)
				if err != nil {
					t.Fatalf("ClassCEL: %v", err)
				}
				prog, err := CompileSelector(expr)
				if err != nil {
					t.Fatalf("compile %s: %v", expr, err)
				}
				var got []string
				for _, s := range append(profileSlices(t, "dgx-h100", "node-a", legacy), legacySlice("node-a", devices...)) {
					for i := range s.Spec.Devices {
						d := &s.Spec.Devices[i]
						match(t, prog, celDevice(s.Spec.Driver, d), d.Name, &got)
						var none []string
						match(t, prog, celDevice("gpu.example.com", d), d.Name, &none)
						if len(none) > 0 {
							t.Errorf("%s selects device %s of another driver", expr, d.Name)
						}
					}
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("selects %v\nwant %v", got, tt.want)
				}
			})
		}
	}
}

// TestClassCELRefuses: what a legacy pool's selector cannot say is an error, never a
// selector that says something else.
func TestClassCELRefuses(t *testing.T) {
	tests := []struct {
		name string
		pool v1alpha1.RdmaPool
		want string
	}{
		{"legacy with a selector", v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy,
			Selectors: v1alpha1.PoolSelectors{LinkTypes: []v1alpha1.LinkType{"IB"}}}}, "spec.selectors: must be empty in legacy mode"},
		{"legacy with a minimum speed", v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy,
			Selectors: v1alpha1.PoolSelectors{MinSpeedGbps: ptr.To[int32](100)}}}, "spec.selectors: must be empty in legacy mode"},
		{"legacy without a name", v1alpha1.RdmaPool{Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy}}, "metadata.name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr, err := ClassCEL(devicemodel.DefaultDriverName, &tt.pool)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("ClassCEL = %q, %v; want an error containing %q", expr, err, tt.want)
			}
		})
	}
	// PoolCEL has no name to put into a legacy pool's selector.
	if expr, err := PoolCEL(devicemodel.DefaultDriverName, &v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy}); err == nil {
		t.Errorf("PoolCEL of a legacy spec = %q, want an error", expr)
	}
}

func TestPoolCELText(t *testing.T) {
	spec := v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeShared, Selectors: v1alpha1.PoolSelectors{
		Vendors: []string{"15b3"}, IfNames: []string{"ib0", "ibp*.1"}, LinkTypes: []v1alpha1.LinkType{"IB"}}}
	got, err := PoolCEL("rdma.dra.io", &spec)
	if err != nil {
		t.Fatal(err)
	}
	want := `device.driver == "rdma.dra.io" && device.attributes["rdma.dra.io"].mode == "shared"` +
		` && has(device.attributes["rdma.dra.io"].vendor_id) && device.attributes["rdma.dra.io"].vendor_id in ["15b3"]` +
		` && has(device.attributes["rdma.dra.io"].link_layer) && device.attributes["rdma.dra.io"].link_layer in ["InfiniBand"]` +
		` && has(device.attributes["rdma.dra.io"].netdev) && (device.attributes["rdma.dra.io"].netdev in ["ib0"]` +
		` || device.attributes["rdma.dra.io"].netdev.matches("^(?:ibp[^/]*\\x{2e}1)$"))`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}

	legacy := &v1alpha1.RdmaPool{ObjectMeta: metav1.ObjectMeta{Name: "hca-shared-devices-a"},
		Spec: v1alpha1.RdmaPoolSpec{Mode: v1alpha1.PoolModeLegacy, CEL: "true"}}
	got, err = ClassCEL("rdma.dra.io", legacy)
	if err != nil {
		t.Fatal(err)
	}
	want = `device.driver == "rdma.dra.io" && device.attributes["rdma.dra.io"].mode == "legacy"` +
		` && has(device.attributes["rdma.dra.io"].legacy_resource) && device.attributes["rdma.dra.io"].legacy_resource == "hca-shared-devices-a"` +
		" && (true\n)"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestCompileSelectorErrors(t *testing.T) {
	tests := []struct{ name, expr, want string }{
		{"syntax", `device.attributes[`, "compilation failed"},
		{"not a bool", `device.driver`, "must evaluate to bool"},
		{"too long", strings.Repeat("x", resourceapi.CELSelectorExpressionMaxLength+1), "the API allows 10240"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CompileSelector(tt.expr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestGlobToRegexpAgreesWithPathMatch compares the translation with path.Match, which
// the node configuration uses, on names that probe every construct.
func TestGlobToRegexpAgreesWithPathMatch(t *testing.T) {
	patterns := []string{"ib*", "ibp*s0", "mlx5_?", "mlx5_[0-3]", "bond[^0-6]", `a\*b`, `a\[b`, "0000:1a:*.?",
		"a.b", "a+b", "(x)", "[a-c][^x-z]*", `[\]]x`, "*", "?", "a|b", "^a$", "[.]", `[\-]`, "x{2}", "é*", "[é-ê]"}
	names := []string{"", "ib0", "ibp24s0", "ibp24s1", "mlx5_0", "mlx5_10", "mlx5_4", "bond7", "bond3", "a*b", "axb", "a[b",
		"0000:1a:00.0", "0000:1a:00.10", "a.b", "aXb", "a+b", "aab", "(x)", "x", "ab", "bw", "]x", "a|b", "^a$", ".", "-",
		"xx", "x{2}", "é", "éa", "ê", "a/b", "ib/0"}
	for _, p := range patterns {
		if _, err := path.Match(p, ""); err != nil {
			t.Fatalf("test pattern %q is invalid: %v", p, err)
		}
		re, err := globToRegexp(p)
		if err != nil {
			t.Fatalf("globToRegexp(%q): %v", p, err)
		}
		compiled := regexp.MustCompile("^(?:" + re + ")$")
		for _, n := range names {
			want, _ := path.Match(p, n)
			if got := compiled.MatchString(n); got != want {
				t.Errorf("pattern %q (%s) on %q: regexp says %v, path.Match %v", p, re, n, got, want)
			}
		}
	}
}

func FuzzGlobToRegexp(f *testing.F) {
	for _, s := range []string{"ib*", "mlx5_[0-3]", `a\*`, "[^a-c]?", "0000:1a:*"} {
		f.Add(s, "mlx5_1")
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		// Attribute values are valid UTF-8 (the device model omits others), and
		// validation refuses patterns path.Match cannot read.
		if !utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return
		}
		want, err := path.Match(pattern, name)
		if err != nil {
			return
		}
		re, err := globToRegexp(pattern)
		if err != nil {
			t.Fatalf("globToRegexp(%q) refuses a pattern path.Match accepts: %v", pattern, err)
		}
		compiled, err := regexp.Compile("^(?:" + re + ")$")
		if err != nil {
			t.Fatalf("globToRegexp(%q) = %q does not compile: %v", pattern, re, err)
		}
		if got := compiled.MatchString(name); got != want {
			t.Errorf("pattern %q (%s) on %q: regexp %v, path.Match %v", pattern, re, name, got, want)
		}
	})
}

func TestCELString(t *testing.T) {
	for _, s := range []string{`plain`, `quo"te`, `back\slash`, "tab\t", "é", "\U0001F600"} {
		t.Run(s, func(t *testing.T) {
			res := celCompiler.CompileCELExpression(celString(s)+` == `+celString(s)+` && size(`+celString(s)+`) >= 0`, dracel.Options{})
			if res.Error != nil {
				t.Fatalf("%s: %v", celString(s), res.Error)
			}
		})
	}
}

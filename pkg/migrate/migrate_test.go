package migrate

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// render is what the CLI prints: the pools on stdout, the node side it writes to
// --node-config-out, then the notes and problems on stderr; or the error of an input it
// cannot read.
func render(t *testing.T, res *Result, err error) string {
	t.Helper()
	if err != nil {
		return "# error (stderr, exit 2)\n" + err.Error() + "\n"
	}
	out, err := WriteYAML(res.Pools)
	if err != nil {
		t.Fatal(err)
	}
	nodeSide := ""
	if len(res.LegacyResources) > 0 {
		data, err := NodeConfig(nil, res.LegacyResources)
		if err != nil {
			t.Fatal(err)
		}
		nodeSide = "# node configuration (--node-config-out)\n" + string(data)
	}
	var problems []string
	for _, p := range res.Problems {
		problems = append(problems, p.String())
	}
	return string(out) + nodeSide + "# notes (stderr)\n" + strings.Join(res.Notes, "\n") + "\n# problems (stderr, exit 2 or 3)\n" + strings.Join(problems, "\n") + "\n"
}

func TestGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.json")
	yamls, _ := filepath.Glob("testdata/*.yaml")
	files = append(files, yamls...)
	if len(files) < 6 {
		t.Fatalf("only %d inputs in testdata", len(files))
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			opts := Options{InputName: file}
			convert := FromSharedDevicePlugin
			if strings.HasPrefix(filepath.Base(file), "sriov-") {
				convert = FromSRIOVDevicePlugin
			}
			res, err := convert(data, opts)
			got := render(t, res, err)
			golden := file + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./pkg/migrate -update)", err)
			}
			if got != string(want) {
				t.Errorf("output differs from %s (go test ./pkg/migrate -update rewrites it):\n%s", golden, got)
			}
			if res == nil {
				return
			}
			// Every pool printed is one the controller accepts, and every legacy pool
			// has its entry in the node configuration.
			for _, p := range res.Pools {
				if errs := p.Validate(); len(errs) > 0 {
					t.Errorf("pool %s is invalid: %v", p.Name, errs.ToAggregate())
				}
				if p.Spec.Mode == v1alpha1.PoolModeLegacy && !slices.ContainsFunc(res.LegacyResources, func(lr nodeconfig.LegacyResource) bool { return lr.Name == p.Name }) {
					t.Errorf("legacy pool %s has no legacyResources entry", p.Name)
				}
			}
			checkDecodable(t, got)
		})
	}
}

// checkDecodable decodes every printed document strictly back into an RdmaPool.
func checkDecodable(t *testing.T, out string) {
	t.Helper()
	names := sets.New[string]()
	pools, _, _ := strings.Cut(out, "# ")
	for _, doc := range strings.Split(pools, "---\n") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var p v1alpha1.RdmaPool
		if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
			t.Errorf("decode printed pool: %v\n%s", err, doc)
		}
		if p.APIVersion != "rdma.dra.io/v1alpha1" || p.Kind != "RdmaPool" || names.Has(p.Name) {
			t.Errorf("pool %q: apiVersion %q kind %q (duplicate name: %v)", p.Name, p.APIVersion, p.Kind, names.Has(p.Name))
		}
		names.Insert(p.Name)
	}
}

func TestKeyNotes(t *testing.T) {
	read := func(name string) []byte {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	shared, err := FromSharedDevicePlugin(read("shared-readme.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sriov, err := FromSRIOVDevicePlugin(read("sriov-selectors-list.json"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		res   *Result
		wants []string
	}{
		{"the unit is kept", shared, []string{"unit kept: one unit of each resource still gives a pod every port", "--values-out or --node-config-out"}},
		{"VF ranges", sriov, []string{"enp59s0f0np0#0-3", "no equivalent", "--allow-widening roce_vfs:selectors[0].pfNames"}},
		{"rootDevices", sriov, []string{"rootDevices [0000:3b:00.0] has no equivalent", "--allow-widening ib_vfs_by_root:rootDevices"}},
		{"second selector set", sriov, []string{"2 selector sets"}},
		{"non-RDMA skipped", sriov, []string{"(dpdk_vfs): not an RDMA resource"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			all := strings.Join(tt.res.Notes, "\n")
			for _, p := range tt.res.Problems {
				all += "\n" + p.String()
			}
			for _, w := range tt.wants {
				if !strings.Contains(all, w) {
					t.Errorf("no note says %q:\n%s", w, all)
				}
			}
		})
	}
}

func TestUnreadableInput(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"not YAML", "{", "parse input"},
		{"another kind", "kind: Pod\n", "input is a Pod"},
		{"ConfigMap without config.json", "kind: ConfigMap\ndata: {other: x}\n", `no data."config.json"`},
		{"NicClusterPolicy without the section", "kind: NicClusterPolicy\nspec: {}\n", "no spec.rdmaSharedDevicePlugin.config"},
		{"empty configList", `{"configList": []}`, "no configList entries"},
		{"wrong type", `{"configList": [{"resourceName": 7}]}`, "decode config file configList[0]: resourceName is number, which is the wrong type"},
		{"a list", `[1, 2]`, "parse input: want a JSON or YAML object (the plugin's config.json, a ConfigMap or a NicClusterPolicy), got a list"},
		{"an SR-IOV config", `{"resourceList": [{"resourceName": "x"}]}`, "config file has resourceList, not configList: this looks like an sriov-network-device-plugin config; use --from-sriov-device-plugin"},
		{"an SR-IOV NicClusterPolicy", "kind: NicClusterPolicy\nspec: {sriovDevicePlugin: {config: '{}'}}\n", "NicClusterPolicy has no spec.rdmaSharedDevicePlugin.config but has spec.sriovDevicePlugin.config: use --from-sriov-device-plugin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := FromSharedDevicePlugin([]byte(tt.data), Options{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
	t.Run("JSON where the plugin reads JSON", testJSONInput)
	if _, err := FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourceName":"x","selectors":7}]}`), Options{}); err == nil ||
		!strings.Contains(err.Error(), "decode selectors") {
		t.Errorf("sriov with bad selectors: %v", err)
	}
}

func TestPoolName(t *testing.T) {
	taken := map[string]bool{}
	for _, tt := range []struct{ in, want string }{
		{"hca_shared_devices_a", "hca-shared-devices-a"},
		{"HCA_Shared_Devices_A", "hca-shared-devices-a-2"},
		{"__", "rdma-pool"},
		{"a..b", "a-b"},
		{strings.Repeat("x", 300), strings.Repeat("x", 56)},
		// The suffix fits within the 56 characters a legacy pool's name may have.
		{strings.Repeat("x", 300), strings.Repeat("x", 54) + "-2"},
		{strings.Repeat("y", 55) + "_z", strings.Repeat("y", 55)},
		{strings.Repeat("y", 55) + "_w", strings.Repeat("y", 54) + "-2"},
	} {
		if got := poolName(tt.in, taken); got != tt.want {
			t.Errorf("poolName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestWidening: every value or field that would make a pool select more than the entry
// did is a problem naming the entry, the field and the flag that accepts it; with the
// flag it is a note that says what widened.
func TestWidening(t *testing.T) {
	shared := func(sel string) string {
		return `{"configList":[{"resourceName":"hca","rdmaHcaMax":100,"selectors":` + sel + `}]}`
	}
	sriov := func(sel string) string {
		return `{"resourceList":[{"resourceName":"vfs","selectors":` + sel + `}]}`
	}
	tests := []struct {
		name, input string
		sriov       bool
		allow       []string
		problems    []string
		note        string
	}{
		{name: "invalid vendor alone", input: shared(`{"vendors":["zz"]}`),
			problems: []string{`configList[0] (hca): selectors.vendors: "zz" is not a PCI vendor ID of four hex digits; the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port (to accept, pass --allow-widening hca:vendors)`}},
		{name: "invalid vendor accepted", input: shared(`{"vendors":["zz"]}`), allow: []string{"hca:vendors"},
			note: `WIDENED configList[0] (hca): selectors.vendors: "zz" is not a PCI vendor ID of four hex digits; the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port; accepted by --allow-widening hca:vendors: the pool has no selectors.vendors selector and selects ports of any vendors`},
		{name: "invalid value among valid ones", input: shared(`{"deviceIDs":["1021","10xx"]}`),
			problems: []string{`configList[0] (hca): selectors.deviceIDs: "10xx" is not a PCI device ID of four hex digits; the plugin matched no device by it (to accept, pass --allow-widening hca:deviceIDs)`}},
		{name: "bad link type", input: shared(`{"linkTypes":["roce"]}`),
			problems: []string{`configList[0] (hca): selectors.linkTypes: "roce" is not a link type (infiniband, ether, IB, ETH); the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port (to accept, pass --allow-widening hca:linkTypes)`}},
		{name: "pattern in ifNames", input: shared(`{"ifNames":["ib*"]}`),
			problems: []string{`configList[0] (hca): selectors.ifNames: "ib*" is not a literal name (the plugin compares names exactly; a pool reads *, ? and [ as a pattern); the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port (to accept, pass --allow-widening hca:ifNames)`}},
		{name: "two unknown selector fields", input: shared(`{"drivers":["mlx5_core"],"vendor":["15b3"],"ifName":["ib0"]}`),
			problems: []string{
				`configList[0] (hca): selectors.ifName: unknown selector field "ifName": if a plugin version knows it, it narrowed the selection (to accept, pass --allow-widening hca:ifName)`,
				`configList[0] (hca): selectors.vendor: unknown selector field "vendor": if a plugin version knows it, it narrowed the selection (to accept, pass --allow-widening hca:vendor)`}},
		{name: "rootDevices", sriov: true, input: sriov(`{"isRdma":true,"vendors":["15b3"],"rootDevices":["0000:3b:00.0"]}`),
			problems: []string{`resourceList[0] (vfs): selectors.rootDevices: rootDevices [0000:3b:00.0] has no equivalent: they are PF addresses and the VFs have others; without it the pool selects the PFs and the VFs of every PF; list the VFs' addresses in pciAddresses instead (rdma-dra discover shows them) (to accept, pass --allow-widening vfs:rootDevices)`}},
		{name: "rootDevices accepted", sriov: true, input: sriov(`{"isRdma":true,"vendors":["15b3"],"rootDevices":["0000:3b:00.0"]}`), allow: []string{"vfs:rootDevices"},
			note: `WIDENED resourceList[0] (vfs): selectors.rootDevices: rootDevices [0000:3b:00.0] has no equivalent`},
		{name: "pKeys", sriov: true, input: sriov(`{"isRdma":true,"pKeys":["0x7fff"]}`),
			problems: []string{`resourceList[0] (vfs): selectors.pKeys: selector pKeys has no equivalent; refine with spec.cel if an attribute tells the devices apart (to accept, pass --allow-widening vfs:pKeys)`}},
		{name: "the wrong flag accepts nothing", input: shared(`{"vendors":["zz"]}`), allow: []string{"hca:deviceIDs"},
			problems: []string{`configList[0] (hca): selectors.vendors: "zz" is not a PCI vendor ID of four hex digits; the plugin matched no device by it, so this entry selected nothing, while a pool without this selector selects every port (to accept, pass --allow-widening hca:vendors)`}},
		{name: "exact conversion", input: shared(`{"vendors":["15b3"],"linkTypes":["infiniband"]}`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			convert := FromSharedDevicePlugin
			if tt.sriov {
				convert = FromSRIOVDevicePlugin
			}
			res, err := convert([]byte(tt.input), Options{AllowWidening: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range res.Problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != strings.Join(tt.problems, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.problems, "\n"))
			}
			if tt.note != "" && !slices.ContainsFunc(res.Notes, func(n string) bool { return strings.HasPrefix(n, tt.note) }) {
				t.Errorf("no note starts %q:\n%s", tt.note, strings.Join(res.Notes, "\n"))
			}
		})
	}
}

func TestResourcePrefix(t *testing.T) {
	for _, tt := range []struct {
		name, prefix, want string
		sriov              bool
	}{
		{"shared default", "", "rdma/a", false},
		{"shared flag", "example.com", "example.com/a", false},
		{"sriov default", "", "intel.com/a", true},
		{"sriov flag", "nvidia.com", "nvidia.com/a", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"a","rdmaHcaMax":10,"selectors":{"vendors":["15b3"]}}]}`), Options{ResourcePrefix: tt.prefix})
			if tt.sriov {
				res, err = FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourceName":"a","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`), Options{ResourcePrefix: tt.prefix})
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := *res.Pools[0].Spec.ExtendedResourceName; got != tt.want {
				t.Errorf("extendedResourceName %q, want %q", got, tt.want)
			}
		})
	}
}

func TestUnknownFieldsAllReported(t *testing.T) {
	res, err := FromSharedDevicePlugin([]byte(`{"periodicUpdate":5,"configList":[{"resourceName":"a","rdmaHcaMax":3,"rdmaHcaMx":3,"resourcePrefx":"x","selectors":{"vendors":["15b3"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(res.Notes, "\n")
	for _, f := range []string{`"periodicUpdate"`, `"rdmaHcaMx"`, `"resourcePrefx"`} {
		if !strings.Contains(all, "unknown field "+f) {
			t.Errorf("unknown field %s not reported:\n%s", f, all)
		}
	}
}

// TestLinkTypesAsThePoolTakesThem: a device plugin's link type in a case an RdmaPool and
// the node configuration refuse is written as the link layer's own name; one they take
// stays as it was.
func TestLinkTypesAsThePoolTakesThem(t *testing.T) {
	want := []string{"InfiniBand", "Ethernet", "eth"}
	shared, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"a","rdmaHcaMax":5,"selectors":{"vendors":["15b3"],"linkTypes":["Infiniband","ETHER","eth"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(shared.Problems) > 0 || len(shared.LegacyResources) != 1 {
		t.Fatalf("problems %v, %d legacy resources; want none and 1", shared.Problems, len(shared.LegacyResources))
	}
	if got := shared.LegacyResources[0].Selectors.LinkTypes; !slices.Equal(got, want) {
		t.Errorf("legacy resource linkTypes %q, want %q", got, want)
	}
	sriov, err := FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourceName":"a","isRdma":true,"selectors":{"vendors":["15b3"],"linkTypes":["Infiniband","ETHER","eth"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sriov.Problems) > 0 || len(sriov.Pools) != 1 {
		t.Fatalf("problems %v, %d pools; want none and 1", sriov.Problems, len(sriov.Pools))
	}
	var got []string
	for _, lt := range sriov.Pools[0].Spec.Selectors.LinkTypes {
		got = append(got, string(lt))
	}
	if !slices.Equal(got, want) {
		t.Errorf("pool linkTypes %q, want %q", got, want)
	}
}

// testJSONInput: what the plugin reads as JSON is read as JSON, with the line and column
// of a syntax error; a YAML file is still YAML.
func testJSONInput(t *testing.T) {
	const trailing = "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1,\n  \"selectors\": {\"vendors\": [\"15b3\"]},}]}"
	cm := func(config string) string {
		return "kind: ConfigMap\ndata:\n  config.json: |\n    " + strings.ReplaceAll(config, "\n", "\n    ") + "\n"
	}
	for _, tt := range []struct {
		name, input, data, want string // want empty: converted
	}{
		{"a .json file", "config.json", trailing, "parse input as JSON: line 2, column 38 (byte 92): invalid character '}' looking for beginning of object key string"},
		{"stdin starting with {", "-", trailing, "parse input as JSON: line 2, column 38"},
		{"no name, leading blanks", "", "\n  " + trailing, "parse input as JSON: line 3, column 38"},
		{"a .yaml file in flow style", "config.yaml", trailing, ""},
		{"a .YML file", "config.YML", trailing, ""},
		{"cut short", "config.json", `{"configList": [`, "parse input as JSON: line 1, column 17 (byte 16): unexpected end of JSON input"},
		{"two documents", "config.json", `{"configList": []} {}`, "parse input as JSON: line 1, column 20 (byte 19): more after the JSON value"},
		{"a ConfigMap's config.json", "cm.yaml", cm(trailing), `parse ConfigMap data."config.json" as JSON: line 2, column 38`},
		{"a NicClusterPolicy's config", "ncp.yaml", "kind: NicClusterPolicy\nspec:\n  rdmaSharedDevicePlugin:\n    config: '{\"configList\": [],}'\n",
			"parse NicClusterPolicy spec.rdmaSharedDevicePlugin.config as JSON: line 1, column 19 (byte 18): invalid character '}'"},
		{"a ConfigMap as JSON", "cm.json", `{"kind": "ConfigMap", "data": {"config.json": "{\"configList\": [{\"resourceName\": \"a\", \"rdmaHcaMax\": 1, \"devices\": [\"ib0\"]}]}"}}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := FromSharedDevicePlugin([]byte(tt.data), Options{InputName: tt.input})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("got %v, want it converted", err)
			case tt.want == "" && len(res.Pools) != 1:
				t.Errorf("%d pools (problems %v), want 1", len(res.Pools), res.Problems)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestDuplicateResources: two entries of one resource are a problem, as the plugins
// refuse them: the shared-dev-plugin by resourceName alone, the SR-IOV plugin by prefix
// and name. Names that only look alike are two resources.
func TestDuplicateResources(t *testing.T) {
	for _, tt := range []struct {
		name, input string
		sriov       bool
		pools       []string
		problems    []string // the entries of the problems
	}{
		{name: "shared, same name", input: `{"configList":[{"resourceName":"a","rdmaHcaMax":1,"devices":["ib0"]},{"resourceName":"a","rdmaHcaMax":1,"devices":["ib1"]}]}`,
			pools: []string{"a"}, problems: []string{"configList[1] (a)"}},
		{name: "shared, same name, another prefix", input: `{"configList":[{"resourceName":"a","rdmaHcaMax":1,"devices":["ib0"]},{"resourcePrefix":"x.io","resourceName":"a","rdmaHcaMax":1,"devices":["ib1"]}]}`,
			pools: []string{"a"}, problems: []string{"configList[1] (a)"}},
		{name: "shared, names that differ in case", input: `{"configList":[{"resourceName":"a","rdmaHcaMax":1,"devices":["ib0"]},{"resourceName":"A","rdmaHcaMax":1,"devices":["ib1"]}]}`,
			pools: []string{"a", "a-2"}},
		{name: "sriov, same name", sriov: true, input: `{"resourceList":[{"resourceName":"v","isRdma":true,"selectors":{"vendors":["15b3"]}},{"resourceName":"v","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`,
			pools: []string{"v"}, problems: []string{"resourceList[1] (v)"}},
		{name: "sriov, same name, another prefix", sriov: true, input: `{"resourceList":[{"resourceName":"v","isRdma":true,"selectors":{"vendors":["15b3"]}},{"resourcePrefix":"x.io","resourceName":"v","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`,
			pools: []string{"v", "v-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			convert := FromSharedDevicePlugin
			if tt.sriov {
				convert = FromSRIOVDevicePlugin
			}
			res, err := convert([]byte(tt.input), Options{})
			if err != nil {
				t.Fatal(err)
			}
			var pools, problems []string
			for _, p := range res.Pools {
				pools = append(pools, p.Name)
			}
			for _, p := range res.Problems {
				problems = append(problems, p.Entry)
				if p.Widens() || !strings.Contains(p.Message, "already exists") {
					t.Errorf("problem %q: want one no flag accepts, quoting the plugin", p)
				}
			}
			if !slices.Equal(pools, tt.pools) || !slices.Equal(problems, tt.problems) {
				t.Errorf("pools %q, problems %q; want %q, %q", pools, problems, tt.pools, tt.problems)
			}
		})
	}
}

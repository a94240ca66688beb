package deployments

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/internal/selectorcheck"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// The chart's nodeConfig reaches the plugin unchanged: the ConfigMap holds
// `toYaml .Values.nodeConfig` and the plugin loads it with nodeconfig.Load. Helm checks
// the value against values.schema.json at install time, the plugin checks the file on
// every node. The tests below keep the two checks in agreement, so that what helm accepts
// also starts on the nodes.

const (
	valuesFile = "helm/rdma-dra-driver/values.yaml"
	schemaFile = "helm/rdma-dra-driver/values.schema.json"
)

// chartSchema compiles values.schema.json, or the definition at fragment in it, as Helm
// 3.22 does (chartutil.ValidateAgainstSingleSchema): with the library Helm uses, at the
// version the Helm of mk/manifests.mk requires, under the same resource name, with the
// draft that $schema names (draft-07, under which formats are asserted).
func chartSchema(t *testing.T, fragment string) *jsonschema.Schema {
	t.Helper()
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("decode %s: %v", schemaFile, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///values.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("file:///values.schema.json" + fragment)
	if err != nil {
		t.Fatalf("compile %s%s: %v", schemaFile, fragment, err)
	}
	return s
}

// chartValues returns the chart's default values, decoded as Helm reads a values file.
func chartValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatalf("decode %s: %v", valuesFile, err)
	}
	return values
}

// loadAsPlugin writes nodeConfig as the chart's ConfigMap does (toYaml) and loads it as
// the plugin does. An empty nodeConfig gives no ConfigMap and no file: the defaults.
func loadAsPlugin(t *testing.T, nodeConfig any) error {
	t.Helper()
	if m, ok := nodeConfig.(map[string]any); ok && len(m) == 0 {
		_, err := nodeconfig.FromFile("", nodeconfig.Overrides{})
		return err
	}
	data, err := yaml.Marshal(nodeConfig) // Helm's toYaml
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "node-config.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = nodeconfig.Load(path)
	return err
}

// nodeConfigCase is one nodeConfig value. The schema and the plugin must agree on it:
// both accept it (valid), or both refuse it, each naming the field. A few rules need
// the values of other fields or arithmetic on addresses, which a JSON schema cannot
// express; for those, pluginOnly says why only the plugin refuses the value.
type nodeConfigCase struct {
	name  string
	value string // YAML of .Values.nodeConfig
	valid bool
	// schemaAt is the JSON pointer under /nodeConfig that Helm's error names, pluginErr
	// a part of the plugin's error (its field path); both for invalid values.
	schemaAt, pluginErr string
	pluginOnly          string
}

func nodeConfigCases() []nodeConfigCase {
	tests := []nodeConfigCase{
		{name: "empty", value: "{}", valid: true},
		{name: "every field", valid: true, value: `
version: v1alpha1
include:
- vendors: ["15b3", "0x15B3"]
  deviceIDs: ["1021", "0X101d"]
  drivers: [mlx5_core]
  ibdevs: ["mlx5_*", "mlx5_[0-7]", "rxe?"]
  ifNames: ["ibp*", "bond0", 'eth\*', "[^b]*", "[a-c]x", "[\\]a]"]
  linkTypes: [InfiniBand, ether]
  pciAddresses: ["0000:1a:*"]
  portGUIDs: ["7c8c:0903:00c3:cfee", "0x7C8C090300C3CFEF", "7c8c:0903:*", 'a088\:*']
exclude: [{ifNames: ["bond-storage"]}]
modes: shared
shares: 100
legacy: {mode: exclusive, shares: 4}
network:
  addressPools:
  - name: rail0
    nodes: ["gpu-a-*"]
    selector: {ifNames: [enp168s0f0np0], linkTypes: [ETH]}
    subnet: 10.200.0.0/24
    rangeStart: 10.200.0.100
    rangeEnd: 10.200.0.199
    exclude: [10.200.0.150]
  - {subnet: "fd00:77::/64", rangeStart: "", exclude: ["fd00:77::1"]}
`},
		{name: "empty strings mean the defaults", value: `{version: "", modes: "", legacy: {mode: ""}}`, valid: true},
		{name: "zero shares mean the defaults", value: "{shares: 0, legacy: {shares: 0}}", valid: true},
		{name: "shares written as a float", value: "{shares: 8.0}", valid: true},
		{name: "empty lists", value: "{include: [], exclude: [{}], network: {addressPools: []}}", valid: true},
		{name: "fabric readiness", value: "{fabricReadiness: {enabled: true, include: [{linkTypes: [IB]}], exclude: [{ibdevs: [mlx5_9]}], timeoutSeconds: 120}}", valid: true},
		{name: "fabric timeout zero is the default", value: "{fabricReadiness: {timeoutSeconds: 0}}", valid: true},
		{name: "fabric timeout at the bound", value: fmt.Sprintf("{fabricReadiness: {timeoutSeconds: %d}}", nodeconfig.MaxFabricTimeoutSeconds), valid: true},
		{name: "fabric timeout one too many", value: fmt.Sprintf("{fabricReadiness: {timeoutSeconds: %d}}", nodeconfig.MaxFabricTimeoutSeconds+1), schemaAt: "/fabricReadiness/timeoutSeconds", pluginErr: "fabricReadiness.timeoutSeconds"},
		{name: "fabric timeout negative", value: "{fabricReadiness: {timeoutSeconds: -5}}", schemaAt: "/fabricReadiness/timeoutSeconds", pluginErr: "fabricReadiness.timeoutSeconds"},
		{name: "fabric enabled as a string", value: `{fabricReadiness: {enabled: "yes"}}`, schemaAt: "/fabricReadiness/enabled", pluginErr: "fabricReadiness.enabled"},
		{name: "flapping", value: "{health: {flapping: {windowSeconds: 30, linkDowned: 1, symbolErrors: 500, quietSeconds: 10}}}", valid: true},
		{name: "flapping off", value: "{health: {flapping: {disabled: true}}}", valid: true},
		{name: "flapping zeros are the defaults", value: "{health: {flapping: {windowSeconds: 0, linkDowned: 0}}}", valid: true},
		{name: "flapping at the bounds", value: fmt.Sprintf("{health: {flapping: {windowSeconds: %d, linkDowned: %d, symbolErrors: %d, quietSeconds: %[1]d}}}",
			nodeconfig.MaxFlappingSeconds, nodeconfig.MaxFlappingLinkDowned, nodeconfig.MaxFlappingSymbolErrors), valid: true},
		{name: "flapping link downs one too many", value: fmt.Sprintf("{health: {flapping: {linkDowned: %d}}}", nodeconfig.MaxFlappingLinkDowned+1), schemaAt: "/health/flapping/linkDowned", pluginErr: "health.flapping.linkDowned"},
		{name: "flapping symbol errors one too many", value: fmt.Sprintf("{health: {flapping: {symbolErrors: %d}}}", nodeconfig.MaxFlappingSymbolErrors+1), schemaAt: "/health/flapping/symbolErrors", pluginErr: "health.flapping.symbolErrors"},
		{name: "flapping window negative", value: "{health: {flapping: {windowSeconds: -1}}}", schemaAt: "/health/flapping/windowSeconds", pluginErr: "health.flapping.windowSeconds"},
		{name: "flapping quiet longer than a day", value: "{health: {flapping: {quietSeconds: 86401}}}", schemaAt: "/health/flapping/quietSeconds", pluginErr: "health.flapping.quietSeconds"},
		{name: "flapping window as a duration", value: "{health: {flapping: {windowSeconds: 5m}}}", schemaAt: "/health/flapping/windowSeconds", pluginErr: "health.flapping.windowSeconds"},
		{name: "flapping disabled as a string", value: `{health: {flapping: {disabled: "yes"}}}`, schemaAt: "/health/flapping/disabled", pluginErr: "health.flapping.disabled"},
		{name: "flapping unknown key", value: "{health: {flapping: {window: 30}}}", schemaAt: "/health/flapping", pluginErr: `unknown field "health.flapping.window"`},
		{name: "health unknown key", value: "{health: {flaps: {}}}", schemaAt: "/health", pluginErr: `unknown field "health.flaps"`},
		{name: "fabric selector misspelt", value: "{fabricReadiness: {include: [{linkType: [IB]}]}}", schemaAt: "/fabricReadiness/include/0", pluginErr: "fabricReadiness.include[0].linkType"},

		{name: "rails", value: "{rails: [{rail: 0, selectors: [{pciAddresses: ['0000:0c:00.0']}, {ifNames: [ibp12s0]}]}, {rail: 63, selectors: [{portGUIDs: ['0xa088c20300aa0000']}]}]}", valid: true},
		{name: "rail missing", value: "{rails: [{selectors: [{ibdevs: [mlx5_0]}]}]}", schemaAt: "/rails/0", pluginErr: "rails[0].rail: Required value"},
		{name: "rail one too many", value: fmt.Sprintf("{rails: [{rail: %d, selectors: [{ibdevs: [mlx5_0]}]}]}", nodeconfig.MaxRail+1), schemaAt: "/rails/0/rail", pluginErr: "rails[0].rail"},
		{name: "rail negative", value: "{rails: [{rail: -1, selectors: [{ibdevs: [mlx5_0]}]}]}", schemaAt: "/rails/0/rail", pluginErr: "rails[0].rail"},
		{name: "rail as a string", value: `{rails: [{rail: "0", selectors: [{ibdevs: [mlx5_0]}]}]}`, schemaAt: "/rails/0/rail", pluginErr: "rails.rail"},
		{name: "rail without selectors", value: "{rails: [{rail: 0}]}", schemaAt: "/rails/0", pluginErr: "rails[0].selectors: Required value"},
		{name: "rail with no selector", value: "{rails: [{rail: 0, selectors: []}]}", schemaAt: "/rails/0/selectors", pluginErr: "rails[0].selectors: Required value"},
		{name: "rail selectors too many", value: "{rails: [{rail: 0, selectors: [" + strings.Repeat("{ibdevs: [x]},", nodeconfig.MaxRailSelectors+1) + "]}]}",
			schemaAt: "/rails/0/selectors", pluginErr: "rails[0].selectors: Too many"},
		{name: "rail selector misspelt", value: "{rails: [{rail: 0, selectors: [{pciAddress: ['0000:0c:00.0']}]}]}", schemaAt: "/rails/0/selectors/0", pluginErr: `unknown field "rails[0].selectors[0].pciAddress"`},
		{name: "rail unknown key", value: "{rails: [{id: 0, rail: 0, selectors: [{ibdevs: [x]}]}]}", schemaAt: "/rails/0", pluginErr: `unknown field "rails[0].id"`},
		{name: "port GUID cut short", value: "{include: [{portGUIDs: ['7c8c:0903:00c3']}]}", schemaAt: "/include/0/portGUIDs/0", pluginErr: "include[0].portGUIDs[0]"},
		{name: "port GUID pattern in ibstat's notation", value: "{include: [{portGUIDs: ['0X7c8c*']}]}", schemaAt: "/include/0/portGUIDs/0", pluginErr: "include[0].portGUIDs[0]"},
		{name: "port GUID bad pattern", value: "{include: [{portGUIDs: ['7c8c:[']}]}", schemaAt: "/include/0/portGUIDs/0", pluginErr: "include[0].portGUIDs[0]"},
		{name: "port GUID as a number", value: "{include: [{portGUIDs: [7]}]}", schemaAt: "/include/0/portGUIDs/0", pluginErr: "include.portGUIDs"},

		// Wrong types.
		{name: "shares as a string", value: `{shares: "8"}`, schemaAt: "/shares", pluginErr: "shares"},
		{name: "shares not whole", value: "{shares: 8.5}", schemaAt: "/shares", pluginErr: "shares"},
		{name: "shares as a bool", value: "{shares: true}", schemaAt: "/shares", pluginErr: "shares"},
		{name: "modes as a number", value: "{modes: 1}", schemaAt: "/modes", pluginErr: "modes"},
		{name: "version as a number", value: "{version: 1}", schemaAt: "/version", pluginErr: "version"},
		{name: "include as an object", value: "{include: {vendors: [15b3]}}", schemaAt: "/include", pluginErr: "include"},
		{name: "selector as a string", value: "{exclude: [mlx5_0]}", schemaAt: "/exclude/0", pluginErr: "exclude"},
		{name: "vendors as a string", value: `{include: [{vendors: "15b3"}]}`, schemaAt: "/include/0/vendors", pluginErr: "include.vendors"},
		{name: "vendor as a number", value: `{include: [{vendors: [1021]}]}`, schemaAt: "/include/0/vendors/0", pluginErr: "include.vendors"},
		{name: "null entry", value: `{include: [{drivers: [null]}]}`, schemaAt: "/include/0/drivers/0", pluginErr: "include[0].drivers[0]"},
		{name: "legacy as a list", value: "{legacy: [shared]}", schemaAt: "/legacy", pluginErr: "legacy"},
		{name: "network as a string", value: "{network: none}", schemaAt: "/network", pluginErr: "network"},
		{name: "addressPools as an object", value: "{network: {addressPools: {subnet: 10.0.0.0/24}}}", schemaAt: "/network/addressPools", pluginErr: "network.addressPools"},
		{name: "subnet as a number", value: "{network: {addressPools: [{subnet: 24}]}}", schemaAt: "/network/addressPools/0/subnet", pluginErr: "network.addressPools.subnet"},

		// Out of range.
		{name: "shares too many", value: "{shares: 5000}", schemaAt: "/shares", pluginErr: "shares: Invalid value: 5000"},
		{name: "shares one too many", value: fmt.Sprintf("{shares: %d}", nodeconfig.MaxShares+1), schemaAt: "/shares", pluginErr: "shares: Invalid value"},
		{name: "shares at the bound", value: fmt.Sprintf("{shares: %d}", nodeconfig.MaxShares), valid: true},
		{name: "shares negative", value: "{shares: -1}", schemaAt: "/shares", pluginErr: "shares: Invalid value: -1"},
		{name: "legacy shares one too many", value: fmt.Sprintf("{legacy: {shares: %d}}", nodeconfig.MaxLegacyShares+1), schemaAt: "/legacy/shares", pluginErr: "legacy.shares"},
		{name: "legacy shares at the bound", value: fmt.Sprintf("{legacy: {shares: %d}}", nodeconfig.MaxLegacyShares), valid: true},
		{name: "legacy shares negative", value: "{legacy: {shares: -2}}", schemaAt: "/legacy/shares", pluginErr: "legacy.shares"},
		{name: "legacy resources", value: "{legacyResources: [{name: hca-shared-devices-a, maxPods: 63, selectors: {linkTypes: [IB]}}, {name: b}]}", valid: true},
		{name: "legacy resource max pods at the bound", value: fmt.Sprintf("{legacyResources: [{name: a, maxPods: %d}]}", nodeconfig.MaxLegacyPods), valid: true},
		{name: "legacy resource max pods one too many", value: fmt.Sprintf("{legacyResources: [{name: a, maxPods: %d}]}", nodeconfig.MaxLegacyPods+1), schemaAt: "/legacyResources/0/maxPods", pluginErr: "legacyResources[0].maxPods"},
		{name: "legacy resource max pods negative", value: "{legacyResources: [{name: a, maxPods: -1}]}", schemaAt: "/legacyResources/0/maxPods", pluginErr: "legacyResources[0].maxPods"},
		{name: "legacy resource without a name", value: "{legacyResources: [{maxPods: 3}]}", schemaAt: "/legacyResources/0", pluginErr: "legacyResources[0].name"},
		{name: "legacy resource name not a DNS label", value: "{legacyResources: [{name: hca_a}]}", schemaAt: "/legacyResources/0/name", pluginErr: "legacyResources[0].name"},
		{name: "legacy resource name too long", value: fmt.Sprintf("{legacyResources: [{name: %s}]}", strings.Repeat("a", nodeconfig.MaxLegacyResourceNameLength+1)), schemaAt: "/legacyResources/0/name", pluginErr: "legacyResources[0].name"},
		{name: "legacy resource selector link type", value: "{legacyResources: [{name: a, selectors: {linkTypes: [Infiniband]}}]}", schemaAt: "/legacyResources/0/selectors/linkTypes/0", pluginErr: "legacyResources[0].selectors.linkTypes[0]"},
		{name: "legacy resource unknown key", value: "{legacyResources: [{name: a, rdmaHcaMax: 3}]}", schemaAt: "/legacyResources/0", pluginErr: `unknown field "legacyResources[0].rdmaHcaMax"`},

		// Unknown keys, at every level; names are case-sensitive.
		{name: "unknown key", value: "{mode: both}", schemaAt: "", pluginErr: `unknown field "mode"`},
		{name: "key in another case", value: "{Shares: 4}", schemaAt: "", pluginErr: `unknown field "Shares"`},
		{name: "chart-only key", value: "{example: true}", schemaAt: "", pluginErr: `unknown field "example"`},
		{name: "unknown legacy key", value: "{legacy: {share: 3}}", schemaAt: "/legacy", pluginErr: `unknown field "legacy.share"`},
		{name: "unknown selector key", value: "{include: [{vendor: [15b3]}]}", schemaAt: "/include/0", pluginErr: `unknown field "include[0].vendor"`},
		{name: "unknown network key", value: "{network: {pools: []}}", schemaAt: "/network", pluginErr: `unknown field "network.pools"`},
		{name: "unknown pool key", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, gateway: 10.0.0.1}]}}", schemaAt: "/network/addressPools/0", pluginErr: `unknown field "network.addressPools[0].gateway"`},
		{name: "unknown pool selector key", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, selector: {ifname: [x]}}]}}", schemaAt: "/network/addressPools/0/selector", pluginErr: `unknown field "network.addressPools[0].selector.ifname"`},

		// Enums.
		{name: "version", value: "{version: v2}", schemaAt: "/version", pluginErr: `version: Unsupported value: "v2"`},
		{name: "modes", value: "{modes: all}", schemaAt: "/modes", pluginErr: `modes: Unsupported value: "all"`},
		{name: "modes in another case", value: "{modes: Both}", schemaAt: "/modes", pluginErr: "modes"},
		{name: "legacy mode", value: "{legacy: {mode: both}}", schemaAt: "/legacy/mode", pluginErr: "legacy.mode"},

		// Selector entries.
		{name: "empty vendor", value: `{include: [{vendors: [""]}]}`, schemaAt: "/include/0/vendors/0", pluginErr: "include[0].vendors[0]: Required value"},
		{name: "short vendor", value: `{include: [{vendors: ["15b"]}]}`, schemaAt: "/include/0/vendors/0", pluginErr: "include[0].vendors[0]"},
		{name: "vendor not hex", value: `{include: [{vendors: ["15b3", "xyz1"]}]}`, schemaAt: "/include/0/vendors/1", pluginErr: "include[0].vendors[1]"},
		{name: "long device ID", value: `{exclude: [{deviceIDs: ["0x1021a"]}]}`, schemaAt: "/exclude/0/deviceIDs/0", pluginErr: "exclude[0].deviceIDs[0]"},
		{name: "empty driver", value: `{include: [{drivers: [""]}]}`, schemaAt: "/include/0/drivers/0", pluginErr: "include[0].drivers[0]"},
		{name: "empty ibdev", value: `{include: [{ibdevs: [""]}]}`, schemaAt: "/include/0/ibdevs/0", pluginErr: "include[0].ibdevs[0]"},
		{name: "unclosed class", value: `{exclude: [{ibdevs: ["mlx5_["]}]}`, schemaAt: "/exclude/0/ibdevs/0", pluginErr: "exclude[0].ibdevs[0]"},
		{name: "trailing backslash", value: `{include: [{ifNames: ['eth\']}]}`, schemaAt: "/include/0/ifNames/0", pluginErr: "include[0].ifNames[0]"},
		{name: "empty class", value: `{include: [{pciAddresses: ["0000:[]"]}]}`, schemaAt: "/include/0/pciAddresses/0", pluginErr: "include[0].pciAddresses[0]"},
		{name: "empty negated class", value: `{include: [{pciAddresses: ["[^]"]}]}`, schemaAt: "/include/0/pciAddresses/0", pluginErr: "include[0].pciAddresses[0]"},
		{name: "open range", value: `{include: [{ifNames: ["[a-]"]}]}`, schemaAt: "/include/0/ifNames/0", pluginErr: "include[0].ifNames[0]"},
		{name: "bad pool selector", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, selector: {vendors: [zz]}}]}}", schemaAt: "/network/addressPools/0/selector/vendors/0", pluginErr: "network.addressPools[0].selector.vendors[0]"},
		{name: "bad node pattern", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, nodes: ['gpu-[']}]}}", schemaAt: "/network/addressPools/0/nodes/0", pluginErr: "network.addressPools[0].nodes[0]"},
		{name: "empty node", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, nodes: ['']}]}}", schemaAt: "/network/addressPools/0/nodes/0", pluginErr: "network.addressPools[0].nodes[0]: Required value"},

		// Address pools.
		{name: "pool without subnet", value: "{network: {addressPools: [{name: a}]}}", schemaAt: "/network/addressPools/0", pluginErr: "network.addressPools[0].subnet"},
		{name: "subnet without prefix length", value: "{network: {addressPools: [{subnet: 10.0.0.0}]}}", schemaAt: "/network/addressPools/0/subnet", pluginErr: "network.addressPools[0].subnet"},
		{name: "range start not an address", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, rangeStart: 10.0.0.300}]}}", schemaAt: "/network/addressPools/0/rangeStart", pluginErr: "network.addressPools[0].rangeStart"},
		{name: "excluded address not an address", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, exclude: [gateway]}]}}", schemaAt: "/network/addressPools/0/exclude/0", pluginErr: "network.addressPools[0].exclude[0]"},
		{name: "excluded address with a zone", value: `{network: {addressPools: [{subnet: "fe80::/64", exclude: ["fe80::1%eth0"]}]}}`, schemaAt: "/network/addressPools/0/exclude/0", pluginErr: "network.addressPools[0].exclude[0]"},

		// What only the plugin can check.
		{name: "subnet with host bits", value: "{network: {addressPools: [{subnet: 10.0.0.1/24}]}}", pluginErr: "network.addressPools[0].subnet",
			pluginOnly: "a prefix's host bits are arithmetic on the address"},
		{name: "prefix length too long", value: "{network: {addressPools: [{subnet: 10.0.0.0/33}]}}", pluginErr: "network.addressPools[0].subnet",
			pluginOnly: "the bound of the prefix length depends on the address family"},
		{name: "range start outside the subnet", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, rangeStart: 10.0.1.1}]}}", pluginErr: "network.addressPools[0].rangeStart",
			pluginOnly: "containment compares two fields"},
		{name: "range end before start", value: "{network: {addressPools: [{subnet: 10.0.0.0/24, rangeStart: 10.0.0.9, rangeEnd: 10.0.0.8}]}}", pluginErr: "network.addressPools[0].rangeEnd",
			pluginOnly: "order compares two fields"},
		{name: "range too large", value: `{network: {addressPools: [{subnet: "fd00::/64", rangeEnd: "fd00::ffff:ffff"}]}}`, pluginErr: "network.addressPools[0].rangeEnd",
			pluginOnly: "the size of a range is arithmetic on two fields"},
		{name: "overlapping pools", value: "{network: {addressPools: [{subnet: 10.0.0.0/24}, {name: b, subnet: 10.0.0.0/25}]}}", pluginErr: "network.addressPools[1]",
			pluginOnly: "overlap compares two list entries"},
		{name: "rail listed twice", value: "{rails: [{rail: 1, selectors: [{ibdevs: [a]}]}, {rail: 1, selectors: [{ibdevs: [b]}]}]}", pluginErr: "rails[1].rail: Duplicate value",
			pluginOnly: "uniqueness of one property compares list entries"},
		{name: "one port on two rails", value: "{rails: [{rail: 0, selectors: [{ibdevs: [mlx5_0]}]}, {rail: 1, selectors: [{ibdevs: ['mlx5_*']}]}]}", pluginErr: "rails[1].selectors[0]: Forbidden",
			pluginOnly: "overlap matches the patterns of two list entries"},
		{name: "empty rail selector", value: "{rails: [{rail: 0, selectors: [{}]}]}", pluginErr: "rails[0].selectors[0]: Required value",
			pluginOnly: "draft-07 ignores keywords next to $ref, and the selector is the one of include and exclude, where an empty one is valid"},
		{name: "rail selector of empty lists", value: "{rails: [{rail: 0, selectors: [{ibdevs: []}]}]}", pluginErr: "rails[0].selectors[0]: Required value",
			pluginOnly: "an empty list is as good as none"},
	}
	// Every spelling of a link type an RdmaPool takes, in a selector and in a pool's.
	for _, lt := range v1alpha1.LinkTypes {
		tests = append(tests, nodeConfigCase{name: "link type " + string(lt), valid: true,
			value: fmt.Sprintf("{include: [{linkTypes: [%s]}], network: {addressPools: [{subnet: 10.0.0.0/24, selector: {linkTypes: [%[1]s]}}]}}", lt)})
	}
	for _, lt := range []string{"ETHERNET", "Infiniband", "Ib", "RoCE", `""`} {
		tests = append(tests,
			nodeConfigCase{name: "link type " + lt, value: fmt.Sprintf("{exclude: [{linkTypes: [Ethernet, %s]}]}", lt),
				schemaAt: "/exclude/0/linkTypes/1", pluginErr: "exclude[0].linkTypes[1]: Unsupported value"},
			nodeConfigCase{name: "pool link type " + lt, value: fmt.Sprintf("{network: {addressPools: [{subnet: 10.0.0.0/24, selector: {linkTypes: [%s]}}]}}", lt),
				schemaAt: "/network/addressPools/0/selector/linkTypes/0", pluginErr: "network.addressPools[0].selector.linkTypes[0]: Unsupported value"})
	}
	for _, m := range []nodeconfig.Modes{nodeconfig.ModesBoth, nodeconfig.ModesExclusive, nodeconfig.ModesShared} {
		tests = append(tests, nodeConfigCase{name: "modes " + string(m), value: fmt.Sprintf("{modes: %s}", m), valid: true})
	}
	for _, m := range []nodeconfig.LegacyMode{nodeconfig.LegacyModeExclusive, nodeconfig.LegacyModeShared} {
		tests = append(tests, nodeConfigCase{name: "legacy mode " + string(m), value: fmt.Sprintf("{legacy: {mode: %s}}", m), valid: true})
	}
	return tests
}

// TestNodeConfigSchemaAgreesWithPlugin runs every case through Helm's schema validation
// of the whole values and through the plugin's Load of what the chart renders.
func TestNodeConfigSchemaAgreesWithPlugin(t *testing.T) {
	schema := chartSchema(t, "")
	if err := schema.Validate(chartValues(t)); err != nil {
		t.Fatalf("the chart's default values fail its schema: %v", err)
	}
	for _, tc := range nodeConfigCases() {
		t.Run(tc.name, func(t *testing.T) {
			var nodeConfig any
			if err := yaml.Unmarshal([]byte(tc.value), &nodeConfig); err != nil {
				t.Fatalf("bad test value: %v", err)
			}
			values := chartValues(t)
			values["nodeConfig"] = nodeConfig
			schemaErr := schema.Validate(values)
			pluginErr := loadAsPlugin(t, nodeConfig)

			if tc.valid {
				if schemaErr != nil {
					t.Errorf("the chart's schema refuses it: %v", schemaErr)
				}
				if pluginErr != nil {
					t.Errorf("the plugin refuses it: %v", pluginErr)
				}
				return
			}
			if pluginErr == nil {
				t.Errorf("the plugin accepts it")
			} else if !strings.Contains(pluginErr.Error(), tc.pluginErr) {
				t.Errorf("the plugin's error %q does not name %q", pluginErr, tc.pluginErr)
			}
			if tc.pluginOnly != "" {
				if schemaErr != nil {
					t.Errorf("the chart's schema refuses it too (%v): make it a case for both", schemaErr)
				}
				return
			}
			if schemaErr == nil {
				t.Fatalf("the chart's schema accepts it")
			}
			// Helm prints the error as is: it must point at the field.
			var verr *jsonschema.ValidationError
			if !errors.As(schemaErr, &verr) {
				t.Fatalf("schema error %T: %v", schemaErr, schemaErr)
			}
			want := "/nodeConfig" + tc.schemaAt
			if !slices.Contains(errorLocations(verr), want) {
				t.Errorf("the chart's schema error does not point at %s:\n%v", want, schemaErr)
			}
		})
	}
}

// errorLocations returns the JSON pointers of the leaves of a schema error.
func errorLocations(e *jsonschema.ValidationError) []string {
	if len(e.Causes) == 0 {
		if len(e.InstanceLocation) == 0 {
			return []string{""}
		}
		return []string{"/" + strings.Join(e.InstanceLocation, "/")}
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, errorLocations(c)...)
	}
	return out
}

// TestNodeConfigSchemaMatchesTypes walks nodeconfig.Config and the schema together: every
// JSON field of the Go types is a property of the schema and the other way round, every
// object refuses other properties, and the fields the Go types require are required.
func TestNodeConfigSchemaMatchesTypes(t *testing.T) {
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var root map[string]any
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	resolve := func(s map[string]any) map[string]any {
		for {
			ref, ok := s["$ref"].(string)
			if !ok {
				return s
			}
			name, ok := strings.CutPrefix(ref, "#/definitions/")
			if !ok {
				t.Fatalf("unexpected $ref %s", ref)
			}
			s, _ = root["definitions"].(map[string]any)[name].(map[string]any)
			if s == nil {
				t.Fatalf("no definition %s", name)
			}
		}
	}
	nodeConfig, _ := root["properties"].(map[string]any)["nodeConfig"].(map[string]any)
	if nodeConfig == nil {
		t.Fatal("the schema has no nodeConfig")
	}
	var walk func(path string, typ reflect.Type, s map[string]any)
	walk = func(path string, typ reflect.Type, s map[string]any) {
		s = resolve(s)
		switch typ.Kind() {
		case reflect.Slice:
			if s["type"] != "array" {
				t.Errorf("%s: a list in Go, type %v in the schema", path, s["type"])
				return
			}
			items, _ := s["items"].(map[string]any)
			walk(path+"[]", typ.Elem(), items)
		case reflect.Struct:
			if s["type"] != "object" || s["additionalProperties"] != false {
				t.Errorf("%s: want type object and additionalProperties false, have %v and %v", path, s["type"], s["additionalProperties"])
			}
			props, _ := s["properties"].(map[string]any)
			var goFields, schemaFields, goRequired []string
			for i := range typ.NumField() {
				f := typ.Field(i)
				name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
				goFields = append(goFields, name)
				if !strings.Contains(opts, "omitempty") {
					goRequired = append(goRequired, name)
				}
				prop, _ := props[name].(map[string]any)
				if prop == nil {
					continue
				}
				walk(path+"."+name, f.Type, prop)
			}
			for name := range props {
				schemaFields = append(schemaFields, name)
			}
			var required []string
			if r, ok := s["required"].([]any); ok {
				for _, v := range r {
					required = append(required, fmt.Sprint(v))
				}
			}
			slices.Sort(goFields)
			slices.Sort(schemaFields)
			slices.Sort(goRequired)
			slices.Sort(required)
			if !slices.Equal(goFields, schemaFields) {
				t.Errorf("%s: Go fields %v, schema properties %v", path, goFields, schemaFields)
			}
			if !slices.Equal(goRequired, required) {
				t.Errorf("%s: Go fields without omitempty %v, schema required %v", path, goRequired, required)
			}
		case reflect.Pointer: // an optional value whose zero is valid, e.g. rail 0
			walk(path, typ.Elem(), s)
		case reflect.String, reflect.Int, reflect.Bool:
			if s["type"] == nil && s["enum"] == nil {
				t.Errorf("%s: the schema says neither type nor enum", path)
			}
		default:
			t.Errorf("%s: Go kind %s: teach this test about it", path, typ.Kind())
		}
	}
	walk("nodeConfig", reflect.TypeFor[nodeconfig.Config](), nodeConfig)
}

// TestNodeConfigLinkTypeEnum checks the schema's link types against the API's list, in
// its order.
func TestNodeConfigLinkTypeEnum(t *testing.T) {
	data, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var root struct {
		Definitions struct {
			LinkType struct {
				Enum []v1alpha1.LinkType `json:"enum"`
			} `json:"linkType"`
		} `json:"definitions"`
	}
	if err := yaml.Unmarshal(data, &root); err != nil {
		t.Fatal(err)
	}
	if got := root.Definitions.LinkType.Enum; !slices.Equal(got, v1alpha1.LinkTypes) {
		t.Errorf("values.schema.json linkType enum %v, v1alpha1.LinkTypes %v", got, v1alpha1.LinkTypes)
	}
}

// TestShellPatternSchema compares the schema's shellPattern with the plugin's check of a
// name or shell pattern (selectorcheck.Pattern, path.Match's syntax) on every string of
// up to five characters from an alphabet of the pattern syntax.
func TestShellPatternSchema(t *testing.T) {
	pattern := chartSchema(t, "#/definitions/shellPattern")
	const alphabet = `a*?[]^-\/`
	var mismatches []string
	var gen func(prefix string)
	gen = func(prefix string) {
		plugin := prefix != "" && selectorcheck.Pattern(prefix) == ""
		if schemaOK := pattern.Validate(prefix) == nil; schemaOK != plugin {
			mismatches = append(mismatches, fmt.Sprintf("%q (schema %v, plugin %v)", prefix, schemaOK, plugin))
		}
		if len(prefix) == 5 {
			return
		}
		for _, r := range alphabet {
			gen(prefix + string(r))
		}
	}
	gen("")
	if len(mismatches) > 0 {
		t.Errorf("%d strings where the schema and the plugin disagree, e.g. %v", len(mismatches), mismatches[:min(len(mismatches), 10)])
	}
}

// valuesDoc returns the comment of nodeConfig in values.yaml, without the comment marks.
func valuesDoc(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "# -- Node configuration of the plugin")
	if !ok {
		t.Fatalf("%s: no comment on nodeConfig", valuesFile)
	}
	comment, _, ok := strings.Cut(rest, "\nnodeConfig:")
	if !ok {
		t.Fatalf("%s: no nodeConfig after its comment", valuesFile)
	}
	var b strings.Builder
	for l := range strings.Lines(comment) {
		l = strings.TrimPrefix(l, "#")
		b.WriteString(strings.TrimPrefix(l, " "))
	}
	return b.String()
}

// TestNodeConfigValuesDoc checks the comment on nodeConfig in values.yaml: it names every
// key of the node configuration and every spelling of a link type, and its example passes
// both the chart's schema and the plugin.
func TestNodeConfigValuesDoc(t *testing.T) {
	doc := valuesDoc(t)
	var keys []string
	var collect func(typ reflect.Type)
	collect = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Slice:
			collect(typ.Elem())
		case reflect.Struct:
			for i := range typ.NumField() {
				name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				if !slices.Contains(keys, name) {
					keys = append(keys, name)
				}
				collect(typ.Field(i).Type)
			}
		}
	}
	collect(reflect.TypeFor[nodeconfig.Config]())
	for _, k := range keys {
		if !regexp.MustCompile(`\b` + k + `\b`).MatchString(doc) {
			t.Errorf("%s does not name the nodeConfig key %s", valuesFile, k)
		}
	}

	m := regexp.MustCompile(`linkTypes \(([^)]*)\)`).FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("%s does not list the link types as linkTypes (...)", valuesFile)
	}
	got := regexp.MustCompile(`[A-Za-z]+`).FindAllString(m[1], -1)
	var want []string
	for _, lt := range v1alpha1.LinkTypes {
		want = append(want, string(lt))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s lists the link types %v, v1alpha1.LinkTypes are %v", valuesFile, got, want)
	}

	_, example, ok := strings.Cut(doc, "Example:\n")
	if !ok {
		t.Fatalf("%s: no example of nodeConfig", valuesFile)
	}
	var parsed struct {
		NodeConfig map[string]any `json:"nodeConfig"`
	}
	if err := yaml.UnmarshalStrict([]byte(example), &parsed); err != nil || len(parsed.NodeConfig) == 0 {
		t.Fatalf("the example in %s does not parse as values with a nodeConfig: %v\n%s", valuesFile, err, example)
	}
	values := chartValues(t)
	values["nodeConfig"] = parsed.NodeConfig
	if err := chartSchema(t, "").Validate(values); err != nil {
		t.Errorf("the chart's schema refuses the example: %v", err)
	}
	if err := loadAsPlugin(t, parsed.NodeConfig); err != nil {
		t.Errorf("the plugin refuses the example: %v", err)
	}
}

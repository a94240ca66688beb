package migrate

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// TestNodeSide merges the legacy resources into chart values and node configurations as
// an operator has them: comments, other keys and other entries survive, an entry of the
// same name is replaced in its place, and what the kubelet plugin would refuse is an
// error that says where.
func TestNodeSide(t *testing.T) {
	a := nodeconfig.LegacyResource{Name: "a", MaxPods: 63, Selectors: nodeconfig.Selector{Vendors: []string{"15b3"}, DeviceIDs: []string{"1021"}}}
	b := nodeconfig.LegacyResource{Name: "b", MaxPods: 8, Selectors: nodeconfig.Selector{LinkTypes: []string{"ether"}, PCIAddresses: []string{"*"}}}
	many := make([]nodeconfig.LegacyResource, nodeconfig.MaxLegacyResources+1)
	for i := range many {
		many[i] = nodeconfig.LegacyResource{Name: fmt.Sprintf("r%d", i), MaxPods: 1}
	}
	tests := []struct {
		name      string
		base      string
		resources []nodeconfig.LegacyResource
		values    string // want of Values
		node      string // want of NodeConfig
		err       string // want in both errors
	}{
		{name: "no base", resources: []nodeconfig.LegacyResource{a},
			values: `nodeConfig:
  legacyResources:
    - name: a
      maxPods: 63
      selectors:
        vendors:
          - 15b3
        deviceIDs:
          - "1021"
`,
			node: `version: v1alpha1
legacyResources:
  - name: a
    maxPods: 63
    selectors:
      vendors:
        - 15b3
      deviceIDs:
        - "1021"
`},
		{name: "the user's values survive", resources: []nodeconfig.LegacyResource{a, b},
			base: `# my cluster
image:
  tag: v1 # pinned
nodeConfig:
  shares: 8 # fewer
  legacyResources:
  # kept: not migrated now
  - name: other
    maxPods: 2
  # replaced in place
  - name: a
    maxPods: 1
pools:
  shared: {enabled: false}
`,
			values: `# my cluster
image:
  tag: v1 # pinned
nodeConfig:
  shares: 8 # fewer
  legacyResources:
    # kept: not migrated now
    - name: other
      maxPods: 2
    # replaced in place
    - name: a
      maxPods: 63
      selectors:
        vendors:
          - 15b3
        deviceIDs:
          - "1021"
    - name: b
      maxPods: 8
      selectors:
        linkTypes:
          - ether
        pciAddresses:
          - '*'
pools:
  shared: {enabled: false}
`,
			node: `version: v1alpha1
shares: 8 # fewer
legacyResources:
  # kept: not migrated now
  - name: other
    maxPods: 2
  # replaced in place
  - name: a
    maxPods: 63
    selectors:
      vendors:
        - 15b3
      deviceIDs:
        - "1021"
  - name: b
    maxPods: 8
    selectors:
      linkTypes:
        - ether
      pciAddresses:
        - '*'
`},
		{name: "the chart's empty nodeConfig", base: "nodeConfig: {}\n", resources: []nodeconfig.LegacyResource{b},
			values: `nodeConfig:
  legacyResources:
    - name: b
      maxPods: 8
      selectors:
        linkTypes:
          - ether
        pciAddresses:
          - '*'
`,
			node: `version: v1alpha1
legacyResources:
  - name: b
    maxPods: 8
    selectors:
      linkTypes:
        - ether
      pciAddresses:
        - '*'
`},
		{name: "nodeConfig is no mapping", base: "nodeConfig: [1]\n", resources: []nodeconfig.LegacyResource{a},
			err: "want a mapping, got a list"},
		{name: "legacyResources is no list", base: "nodeConfig:\n  legacyResources: x\n", resources: []nodeconfig.LegacyResource{a},
			err: `legacyResources: want a list, got "x"`},
		{name: "values are no mapping", base: "- a\n", resources: []nodeconfig.LegacyResource{a},
			err: "parse chart values: want a mapping at the top, got a list"},
		{name: "a node configuration the plugin refuses", base: "nodeConfig:\n  shares: 5000\n", resources: []nodeconfig.LegacyResource{a},
			err: "shares"},
		{name: "more entries than a node takes", resources: many,
			err: fmt.Sprintf("legacyResources: Too many: %d: must have at most %d items", len(many), nodeconfig.MaxLegacyResources)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values, verr := Values([]byte(tt.base), tt.resources)
			node, nerr := NodeConfig([]byte(tt.base), tt.resources)
			if tt.err != "" {
				for _, err := range []error{verr, nerr} {
					if err == nil || !strings.Contains(err.Error(), tt.err) {
						t.Errorf("got %v, want an error containing %q", err, tt.err)
					}
				}
				return
			}
			if verr != nil || nerr != nil {
				t.Fatalf("values: %v, node config: %v", verr, nerr)
			}
			if string(values) != tt.values {
				t.Errorf("values:\n%s\nwant:\n%s", values, tt.values)
			}
			if string(node) != tt.node {
				t.Errorf("node config:\n%s\nwant:\n%s", node, tt.node)
			}
			// Both read back as the kubelet plugin reads them, with every entry.
			cfg, err := nodeconfig.Parse(node)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range tt.resources {
				found := false
				for _, got := range cfg.LegacyResources {
					found = found || got.Name == r.Name && got.MaxPods == r.MaxPods
				}
				if !found {
					t.Errorf("node config lacks %s with maxPods %d", r.Name, r.MaxPods)
				}
			}
		})
	}
}

// TestCheckNodeSide: legacy pools without their node side are a problem naming the
// flags that write it; with it, or without legacy pools, there is none.
func TestCheckNodeSide(t *testing.T) {
	shared, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"a","rdmaHcaMax":4,"selectors":{"vendors":["15b3"]}},{"resourceName":"b","rdmaHcaMax":4,"selectors":{"drivers":["mlx5_core"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	sriov, err := FromSRIOVDevicePlugin([]byte(`{"resourceList":[{"resourceName":"v","isRdma":true,"selectors":{"vendors":["15b3"]}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		res     *Result
		written bool
		want    string
	}{
		{"legacy pools alone", shared, false, "pools a, b: a legacy pool selects nothing on a node whose configuration lacks its legacyResources entry; " +
			"write them with --values-out FILE (Helm values, merged over --chart-values) or --node-config-out FILE (a node configuration file for static installs) and roll them out before the pools"},
		{"legacy pools with their node side", shared, true, ""},
		{"exclusive pools need none", sriov, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res := *tt.res
			res.Problems = nil
			res.CheckNodeSide(tt.written)
			var got []string
			for _, p := range res.Problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != tt.want {
				t.Errorf("problems %q, want %q", got, tt.want)
			}
		})
	}
}

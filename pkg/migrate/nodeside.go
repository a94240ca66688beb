package migrate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// A legacy pool selects nothing on a node whose configuration lacks its legacyResources
// entry, so the pools and the node side are written together. The node side is merged
// into what the operator already has, through YAML nodes so that the comments, the order
// and every other key of the file survive:
//
//   - Values: a Helm values file, the chart's nodeConfig (rendered verbatim into the node
//     configuration file) with legacyResources merged in;
//   - NodeConfig: the node configuration file itself, for static installs.
//
// Merging keeps the existing legacyResources entries of other names in their place,
// replaces an entry of the same name where it is, and appends the new ones. The result
// is read back as the kubelet plugin reads it (nodeconfig.Parse), so a combination the
// plugin would refuse (more than nodeconfig.MaxLegacyResources entries) is an error here.

// CheckNodeSide adds a problem when the result has legacy pools and their node side is
// not written (written is false): applied alone, the pools would serve nothing.
func (r *Result) CheckNodeSide(written bool) {
	if written || len(r.LegacyResources) == 0 {
		return
	}
	var names []string
	for _, lr := range r.LegacyResources {
		names = append(names, lr.Name)
	}
	r.problem("pools "+strings.Join(names, ", "), "", "", "a legacy pool selects nothing on a node whose configuration lacks its legacyResources entry; "+
		"write them with %s FILE (Helm values, merged over --chart-values) or %s FILE (a node configuration file for static installs) and roll them out before the pools",
		FlagValuesOut, FlagNodeConfigOut)
}

// Values returns the Helm values file base (empty: none) with nodeConfig.legacyResources
// merged with resources.
func Values(base []byte, resources []nodeconfig.LegacyResource) ([]byte, error) {
	doc, top, err := mappingDocument(base, "chart values")
	if err != nil {
		return nil, err
	}
	nc := mapValue(top, "nodeConfig")
	if err := mergeLegacyResources(nc, resources); err != nil {
		return nil, fmt.Errorf("chart values nodeConfig: %w", err)
	}
	if err := checkNodeConfig(nc); err != nil {
		return nil, fmt.Errorf("chart values nodeConfig: %w", err)
	}
	return encodeYAML(doc)
}

// NodeConfig returns a complete node configuration file: the nodeConfig of the Helm
// values file values (empty: none, the defaults) with legacyResources merged with
// resources.
func NodeConfig(values []byte, resources []nodeconfig.LegacyResource) ([]byte, error) {
	_, top, err := mappingDocument(values, "chart values")
	if err != nil {
		return nil, err
	}
	nc := mapValue(top, "nodeConfig")
	if nc.Kind == yaml.MappingNode && mapString(nc, "version") == "" {
		// A file of its own says its format, first.
		nc.Content = append([]*yaml.Node{
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: "version"},
			{Kind: yaml.ScalarNode, Tag: "!!str", Value: nodeconfig.Version},
		}, nc.Content...)
	}
	if err := mergeLegacyResources(nc, resources); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	if err := checkNodeConfig(nc); err != nil {
		return nil, fmt.Errorf("node config: %w", err)
	}
	return encodeYAML(&yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{nc}})
}

// mappingDocument parses data as one YAML document whose top is a mapping; empty data is
// an empty mapping.
func mappingDocument(data []byte, what string) (*yaml.Node, *yaml.Node, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("parse %s: %w", what, err)
	}
	if doc.Kind == 0 { // empty input
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
	}
	top := doc.Content[0]
	if top.Kind != yaml.MappingNode {
		return nil, nil, fmt.Errorf("parse %s: want a mapping at the top, got %s", what, nodeKind(top))
	}
	return &doc, top, nil
}

// mapValue returns the value of key in mapping m, adding an empty mapping when key is
// absent or null. A flow-style mapping ({}) becomes block style, so that what is added
// reads like the rest of the file.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			v := m.Content[i+1]
			if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
				*v = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", HeadComment: v.HeadComment, LineComment: v.LineComment}
			}
			if v.Kind == yaml.MappingNode && len(v.Content) == 0 {
				v.Style = 0
			}
			return v
		}
	}
	v := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	m.Style = 0
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
	return v
}

// mergeLegacyResources merges resources into nc.legacyResources by name.
func mergeLegacyResources(nc *yaml.Node, resources []nodeconfig.LegacyResource) error {
	if nc.Kind != yaml.MappingNode {
		return fmt.Errorf("want a mapping, got %s", nodeKind(nc))
	}
	list := mapValue(nc, "legacyResources")
	if list.Kind == yaml.MappingNode && len(list.Content) == 0 { // added by mapValue
		*list = yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
	}
	if list.Kind != yaml.SequenceNode {
		return fmt.Errorf("legacyResources: want a list, got %s", nodeKind(list))
	}
	list.Style = 0
	for _, r := range resources {
		n, err := toNode(r)
		if err != nil {
			return fmt.Errorf("legacyResources entry %s: %w", r.Name, err)
		}
		i := 0
		for ; i < len(list.Content); i++ {
			if name := list.Content[i]; name.Kind == yaml.MappingNode && mapString(name, "name") == r.Name {
				break
			}
		}
		if i < len(list.Content) {
			n.HeadComment = list.Content[i].HeadComment
			list.Content[i] = n
			continue
		}
		list.Content = append(list.Content, n)
	}
	return nil
}

func mapString(m *yaml.Node, key string) string {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1].Value
		}
	}
	return ""
}

// toNode is v as a block-style YAML node, with v's JSON names.
func toNode(v any) (*yaml.Node, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	n := doc.Content[0]
	blockStyle(n)
	return n, nil
}

// blockStyle drops the JSON flow and quoting styles; the encoder quotes a string that
// would otherwise read as another type ("1021").
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// checkNodeConfig reads nc as the kubelet plugin reads its node configuration file.
func checkNodeConfig(nc *yaml.Node) error {
	data, err := yaml.Marshal(nc)
	if err != nil {
		return err
	}
	if _, err := nodeconfig.Parse(data); err != nil {
		return err
	}
	return nil
}

func encodeYAML(doc *yaml.Node) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return b.Bytes(), nil
}

// nodeKind names a YAML node's kind for messages.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a mapping"
	case yaml.ScalarNode:
		if n.Tag == "!!null" {
			return "nothing"
		}
		return fmt.Sprintf("%q", n.Value)
	case yaml.AliasNode:
		return "an alias"
	}
	return "nothing"
}

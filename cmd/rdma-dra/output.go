package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/rdma-dra/rdma-dra-driver/internal/natsort"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// naturalCompare is natsort.Compare, the order of names in all output.
func naturalCompare(a, b string) int { return natsort.Compare(a, b) }

// naturalPorts returns the ports in natural order of (IBDev, Port).
func naturalPorts(ports []discovery.Port) []discovery.Port {
	out := slices.Clone(ports)
	slices.SortStableFunc(out, discovery.ComparePorts)
	return out
}

func sortRows(rows []migrate.PreviewRow) {
	slices.SortStableFunc(rows, func(a, b migrate.PreviewRow) int { return discovery.ComparePorts(a.Port, b.Port) })
}

// orderedYAML turns a JSON document into YAML with the same key order, so that json
// and yaml output read alike (sigs.k8s.io/yaml would sort the keys).
func orderedYAML(jsonDoc []byte) ([]byte, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(jsonDoc, &n); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	clearStyle(&n)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return b.Bytes(), nil
}

// clearStyle drops the JSON flow and quoting styles so the YAML is in block style. Strings
// that start with a digit or hold a colon stay quoted: a YAML 1.1 reader would take
// 0000:18:00.0 for a base-60 number.
func clearStyle(n *yaml.Node) {
	n.Style = 0
	if n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value != "" &&
		(strings.Contains(n.Value, ":") || (n.Value[0] >= '0' && n.Value[0] <= '9')) {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		clearStyle(c)
	}
}

package main

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/migrate"
)

// naturalCompare orders names with their digit runs compared as numbers: mlx5_2 before
// mlx5_10, as a person reads them.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		da, db := digitPrefix(a), digitPrefix(b)
		if da > 0 && db > 0 {
			na, nb := trimZeros(a[:da]), trimZeros(b[:db])
			if c := cmp.Or(cmp.Compare(len(na), len(nb)), cmp.Compare(na, nb)); c != 0 {
				return c
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return cmp.Compare(a[0], b[0])
		}
		a, b = a[1:], b[1:]
	}
	return cmp.Compare(len(a), len(b))
}

func digitPrefix(s string) int {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	return i
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// naturalPorts returns the ports in natural order of (IBDev, Port).
func naturalPorts(ports []discovery.Port) []discovery.Port {
	out := slices.Clone(ports)
	slices.SortStableFunc(out, func(a, b discovery.Port) int {
		return cmp.Or(naturalCompare(a.IBDev, b.IBDev), cmp.Compare(a.Port, b.Port))
	})
	return out
}

func sortRows(rows []migrate.PreviewRow) {
	slices.SortStableFunc(rows, func(a, b migrate.PreviewRow) int {
		return cmp.Or(naturalCompare(a.Port.IBDev, b.Port.IBDev), cmp.Compare(a.Port.Port, b.Port.Port))
	})
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

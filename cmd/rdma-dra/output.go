package main

import (
	"cmp"
	"fmt"
	"slices"

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
	out, err := yaml.Marshal(&n)
	if err != nil {
		return nil, fmt.Errorf("encode yaml: %w", err)
	}
	return out, nil
}

// clearStyle drops the JSON flow and quoting styles so the YAML is in block style.
func clearStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		clearStyle(c)
	}
}

// Package selectorcheck normalizes and validates the values of port selectors the same
// way wherever an admin writes them: in an RdmaPool and in a node's configuration.
package selectorcheck

import (
	"path"
	"strings"
)

// NormalizeHexID spells a PCI vendor or device ID the way discovery reports it: lower case,
// without 0x ("0x15B3" becomes "15b3").
func NormalizeHexID(v string) string {
	return strings.TrimPrefix(strings.ToLower(v), "0x")
}

// HexID returns what is wrong with a PCI vendor or device ID, or "" when, normalized, it
// is four hex digits.
func HexID(v string) string {
	n := NormalizeHexID(v)
	if len(n) != 4 || strings.Trim(n, "0123456789abcdef") != "" {
		return "must be four hex digits, e.g. 15b3 or 0x15b3"
	}
	return ""
}

// Pattern returns what is wrong with a name or shell pattern as path.Match reads it, or
// "" when it is valid. path.Match reports a malformed pattern also when the name does not
// match, so matching the empty name is enough to find out.
func Pattern(v string) string {
	if _, err := path.Match(v, ""); err != nil {
		return "must be a name or a valid shell pattern (*, ?, [a-z])"
	}
	return ""
}

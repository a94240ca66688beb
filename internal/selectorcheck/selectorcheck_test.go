package selectorcheck

import "testing"

func TestChecks(t *testing.T) {
	for _, tc := range []struct {
		in               string
		norm             string
		hexOK, patternOK bool
	}{
		{"15b3", "15b3", true, true},
		{"0x15B3", "15b3", true, true},
		{"15b", "15b", false, true},
		{"xyz1", "xyz1", false, true},
		{"ib*", "ib*", false, true},
		{"ib[", "ib[", false, false},
		{"", "", false, true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := NormalizeHexID(tc.in); got != tc.norm {
				t.Errorf("NormalizeHexID(%q) = %q, want %q", tc.in, got, tc.norm)
			}
			if got := HexID(tc.in) == ""; got != tc.hexOK {
				t.Errorf("HexID(%q) ok = %v, want %v", tc.in, got, tc.hexOK)
			}
			if got := Pattern(tc.in) == ""; got != tc.patternOK {
				t.Errorf("Pattern(%q) ok = %v, want %v", tc.in, got, tc.patternOK)
			}
		})
	}
}

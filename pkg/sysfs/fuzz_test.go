package sysfs

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// The fuzz targets check that parsers of outside input never panic and that what they
// accept is consistent with what they return.

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"400 Gb/sec (4X NDR)", "2.5 Gb/sec (1X SDR)", "100 Gb/sec", "x Gb/sec (X)"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseRate(s)
		if err != nil {
			return
		}
		// The whole part of the number before " Gb/sec" is what the parser returns.
		whole, _, _ := strings.Cut(strings.SplitN(s, " ", 2)[0], ".")
		if n < 0 || strconv.Itoa(n) != strings.TrimLeft(whole, "0") && n != 0 {
			t.Fatalf("ParseRate(%q) = %d", s, n)
		}
	})
}

func FuzzParsePortState(f *testing.F) {
	for _, s := range []string{"4: ACTIVE", "1: DOWN", "5: LinkUp", "7: Phy Test", ": "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if name, err := ParsePortState(s); err == nil && !strings.HasSuffix(s, ": "+name) {
			t.Fatalf("ParsePortState(%q) = %q", s, name)
		}
		if name, err := ParsePhysState(s); err == nil && !strings.HasSuffix(s, ": "+name) {
			t.Fatalf("ParsePhysState(%q) = %q", s, name)
		}
		_, _ = ParseNodeType(s)
	})
}

func FuzzParseGID(f *testing.F) {
	for _, s := range []string{
		"0000:0000:0000:0000:0000:ffff:0a00:0605",
		"fe80:0000:0000:0000:7c8c:0903:00c3:cfee",
		"0000:0000:0000:0000:0000:0000:0000:0000",
		"fe80::1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		g, err := ParseGID(s)
		if err != nil {
			return
		}
		// What parses prints back the same, up to case, and belongs to at most one class.
		if !strings.EqualFold(g.String(), s) {
			t.Fatalf("ParseGID(%q).String() = %q", s, g.String())
		}
		classes := 0
		for _, c := range []bool{g.IsZero(), g.IsIPv4Mapped(), g.IsLinkLocal(), g.IsGlobalIPv6()} {
			if c {
				classes++
			}
		}
		if classes > 1 {
			t.Fatalf("GID %s is in %d classes", s, classes)
		}
	})
}

func FuzzParseDevNumber(f *testing.F) {
	for _, s := range []string{"231:192", "0:0", "4095:1048575", "1:", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDevNumber(s)
		if err != nil {
			return
		}
		// What parses prints in a form that parses to the same numbers.
		if dd, err := ParseDevNumber(d.String()); err != nil || dd != d {
			t.Fatalf("ParseDevNumber(%q) = %v does not round-trip: %v, %v", s, d, dd, err)
		}
	})
}

func FuzzParseIDs(f *testing.F) {
	for _, s := range []string{"0x15b3", "0x020700", "0x538", "7c8c:0903:00c3:cfee", "-1", "Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if id, err := ParsePCIID(s); err == nil && len(id) != 4 {
			t.Fatalf("ParsePCIID(%q) = %q", s, id)
		}
		if c, err := ParsePCIClass(s); err == nil && c >= 1<<24 {
			t.Fatalf("ParsePCIClass(%q) = %#x", s, c)
		}
		if g, err := ParseGUID(s); err == nil && len(g) != 19 {
			t.Fatalf("ParseGUID(%q) = %q", s, g)
		}
		if n, ok, err := ParseNUMANode(s); err == nil && (n < 0 || (!ok && n != 0)) {
			t.Fatalf("ParseNUMANode(%q) = %d, %v", s, n, ok)
		}
		if n, err := ParseIfName(s); err == nil && strings.ContainsAny(n, "/ ") {
			t.Fatalf("ParseIfName(%q) = %q", s, n)
		}
		_, _ = ParseLID(s)
		_, _ = ParseBondSlaves(s)
	})
}

func FuzzParseCounter(f *testing.F) {
	for _, s := range []string{"0", "237159415345822", "18446744073709551615", "18446744073709551616", "N/A (no PMA)", "-1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseCounter(s)
		if err != nil {
			return
		}
		// What it accepts is exactly what strconv reads as a plain unsigned decimal.
		if w, werr := strconv.ParseUint(s, 10, 64); werr != nil || w != v || strings.ContainsAny(s, "+_") {
			t.Fatalf("ParseCounter(%q) = %d; strconv says %d, %v", s, v, w, werr)
		}
	})
}

func FuzzParseVPD(f *testing.F) {
	f.Add(cx8VPD())
	f.Add([]byte{0x78})
	f.Add([]byte{0x90, 0x04, 0x00, 'V', '3', 0x01, 'x', 0x78})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := ParseVPD(b)
		if err != nil {
			return
		}
		// Whatever parses has well-formed keywords whose values fit the input.
		for _, fld := range v.ReadOnly {
			if len(fld.Keyword) != 2 || !isKeywordChar(fld.Keyword[0]) || !isKeywordChar(fld.Keyword[1]) || len(fld.Value) > len(b) {
				t.Fatalf("ParseVPD(%x) field %q of %d bytes", b, fld.Keyword, len(fld.Value))
			}
		}
	})
}

func FuzzParsePKey(f *testing.F) {
	for _, s := range []string{"0xffff", "0x8001", "0x0000", "0x", "ffff", "0x12345", "0xgg"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParsePKey(s)
		if err != nil {
			return
		}
		// What parses is 0x and one to four hex digits, and reads back as that value.
		back, err := ParsePKey(fmt.Sprintf("0x%04x", v))
		if err != nil || back != v {
			t.Fatalf("ParsePKey(%q) = %#x, which does not read back: %#x, %v", s, v, back, err)
		}
		if !strings.EqualFold(strings.TrimLeft(s[2:], "0"), strings.TrimLeft(fmt.Sprintf("%x", v), "0")) {
			t.Fatalf("ParsePKey(%q) = %#x", s, v)
		}
	})
}

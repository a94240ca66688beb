package sysfs

import (
	"net/netip"
	"strings"
)

// GID is one entry of a port's GID table: an IPv6-shaped 128-bit identifier.
type GID [16]byte

// ParseGID parses ports/<p>/gids/<i>: eight groups of four hex digits separated by ':',
// never compressed ("0000:0000:0000:0000:0000:ffff:0a00:0605").
func ParseGID(s string) (GID, error) {
	const want = "eight groups of four hex digits separated by ':'"
	var g GID
	if len(s) != 39 {
		return g, syntaxError(s, want)
	}
	for i := 0; i < 8; i++ {
		grp := s[i*5 : i*5+4]
		if !isHex(grp) || (i < 7 && s[i*5+4] != ':') {
			return g, syntaxError(s, want)
		}
		g[2*i] = hexByte(grp[0], grp[1])
		g[2*i+1] = hexByte(grp[2], grp[3])
	}
	return g, nil
}

func hexByte(hi, lo byte) byte { return hexNibble(hi)<<4 | hexNibble(lo) }

// hexNibble expects a valid hex digit (checked by isHex).
func hexNibble(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// Addr returns the GID as an IPv6 address.
func (g GID) Addr() netip.Addr { return netip.AddrFrom16(g) }

// String returns the GID in the kernel's uncompressed sysfs spelling, lower case.
func (g GID) String() string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	b.Grow(39)
	for i := 0; i < 16; i += 2 {
		if i > 0 {
			b.WriteByte(':')
		}
		for _, v := range g[i : i+2] {
			b.WriteByte(digits[v>>4])
			b.WriteByte(digits[v&0xf])
		}
	}
	return b.String()
}

// IsZero reports whether the entry is unused (all zeros).
func (g GID) IsZero() bool { return g == GID{} }

// IsIPv4Mapped reports whether the GID is an IPv4-mapped address (::ffff:a.b.c.d), the
// entry a RoCE port gets for each IPv4 address of its netdev.
func (g GID) IsIPv4Mapped() bool { return g.Addr().Is4In6() }

// IsLinkLocal reports whether the GID is in fe80::/10, like the default GID of every port.
func (g GID) IsLinkLocal() bool { return g.Addr().IsLinkLocalUnicast() }

// IsGlobalIPv6 reports whether the GID is a routable IPv6 unicast address: not zero, not
// IPv4-mapped, not link-local, not loopback or multicast. Unique local addresses count as
// global, as they do for routing.
func (g GID) IsGlobalIPv6() bool {
	a := g.Addr()
	return !a.Is4In6() && a.IsGlobalUnicast()
}

// IsRoutable reports whether a RoCE v2 entry with this GID can carry routed traffic, so
// that the GID index rule may pick it: an IPv4-mapped or global IPv6 address, never the
// zero GID and never a link-local one (fe80::/10, or IPv4's 169.254/16).
func (g GID) IsRoutable() bool {
	return !g.IsZero() && !g.IsLinkLocal() && (g.IsIPv4Mapped() || g.IsGlobalIPv6())
}

// GIDType is the RoCE version of a GID entry (gid_attrs/types/<i>).
type GIDType string

// GID types as the kernel spells them.
const (
	GIDTypeRoCEv1 GIDType = "IB/RoCE v1"
	GIDTypeRoCEv2 GIDType = "RoCE v2"
)

// ParseGIDType parses gid_attrs/types/<i>.
func ParseGIDType(s string) (GIDType, error) {
	switch t := GIDType(s); t {
	case GIDTypeRoCEv1, GIDTypeRoCEv2:
		return t, nil
	}
	return "", syntaxError(s, `"IB/RoCE v1" or "RoCE v2"`)
}

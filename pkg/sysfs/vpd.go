package sysfs

import (
	"encoding/binary"
	"fmt"
	"strings"
)

// VPD is the Vital Product Data of a PCI function, as its vpd file holds it (PCI Local
// Bus Specification 3.0, Appendix I): a sequence of resources, each a tag and a length,
// ending with the small end tag 0x78. NVIDIA adapters fill an identifier string (the
// product name) and a read-only section of two-character keywords: PN part number, SN
// serial number, V3 a card UUID, VU a per-function ID and so on.
type VPD struct {
	// Name is the identifier string (large resource 0x82).
	Name string
	// ReadOnly are the keywords of the read-only section (large resource 0x90), in the
	// order they are written, the checksum keyword RV included.
	ReadOnly []VPDField
}

// VPDField is one keyword of a VPD section and its value.
type VPDField struct {
	// Keyword is the two-character name, e.g. SN or V3.
	Keyword string
	// Value is the field's data as written.
	Value []byte
}

// Keyword returns the value of the read-only keyword kw as text, without the spaces
// and NUL bytes some adapters pad values with, and whether the section has it.
func (v *VPD) Keyword(kw string) (string, bool) {
	for _, f := range v.ReadOnly {
		if f.Keyword == kw {
			return strings.TrimRight(string(f.Value), " \x00"), true
		}
	}
	return "", false
}

// VPD resource tags. A large resource's tag has bit 7 set and is followed by a 16-bit
// little-endian length; a small resource's tag holds its name in bits 6..3 and its
// length in bits 2..0.
const (
	vpdLarge      = 0x80
	vpdIDString   = 0x82
	vpdReadOnly   = 0x90
	vpdSmallEnd   = 0x0f // small resource name of the end tag, 0x78 as a whole byte
	vpdFieldHead  = 3    // keyword (2) and length (1)
	vpdLargeHead  = 3    // tag (1) and length (2)
	vpdKeywordLen = 2
)

// ParseVPD parses the content of a vpd file. Every resource must fit in the data, the
// read-only section's fields must fill it exactly, keywords are two letters or digits,
// and the data must end with the end tag; what follows the end tag is ignored (the
// kernel may return more than the VPD's own length). The identifier string and the
// read-only section may each appear once. Other resources (the read-write section) are
// skipped. The checksum of RV is not verified.
func ParseVPD(b []byte) (*VPD, error) {
	v := &VPD{}
	seenName, seenRO := false, false
	for off := 0; off < len(b); {
		tag := b[off]
		if tag&vpdLarge == 0 {
			n := int(tag & 0x07)
			if (tag>>3)&0x0f == vpdSmallEnd {
				return v, nil
			}
			if off+1+n > len(b) {
				return nil, vpdError(off, "small resource %#02x of %d bytes runs past the end of the data", tag, n)
			}
			off += 1 + n
			continue
		}
		if off+vpdLargeHead > len(b) {
			return nil, vpdError(off, "large resource %#02x has no length", tag)
		}
		n := int(binary.LittleEndian.Uint16(b[off+1:]))
		data := off + vpdLargeHead
		if data+n > len(b) {
			return nil, vpdError(off, "large resource %#02x of %d bytes runs past the end of the data (%d bytes)", tag, n, len(b))
		}
		switch tag {
		case vpdIDString:
			if seenName {
				return nil, vpdError(off, "second identifier string")
			}
			seenName = true
			v.Name = strings.TrimRight(string(b[data:data+n]), " \x00")
		case vpdReadOnly:
			if seenRO {
				return nil, vpdError(off, "second read-only section")
			}
			seenRO = true
			fields, err := parseVPDFields(b[data:data+n], data)
			if err != nil {
				return nil, err
			}
			v.ReadOnly = fields
		}
		off = data + n
	}
	return nil, vpdError(len(b), "no end tag 0x78: the data is truncated")
}

// parseVPDFields parses the keywords of a section that starts at offset base.
func parseVPDFields(b []byte, base int) ([]VPDField, error) {
	var out []VPDField
	for off := 0; off < len(b); {
		if off+vpdFieldHead > len(b) {
			return nil, vpdError(base+off, "field header runs past the end of its section")
		}
		kw := b[off : off+vpdKeywordLen]
		if !isKeywordChar(kw[0]) || !isKeywordChar(kw[1]) {
			return nil, vpdError(base+off, "keyword %q is not two letters or digits", kw)
		}
		n := int(b[off+vpdKeywordLen])
		start := off + vpdFieldHead
		if start+n > len(b) {
			return nil, vpdError(base+off, "keyword %s of %d bytes runs past the end of its section", kw, n)
		}
		out = append(out, VPDField{Keyword: string(kw), Value: append([]byte(nil), b[start:start+n]...)})
		off = start + n
	}
	return out, nil
}

func isKeywordChar(c byte) bool {
	return 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// vpdError is a syntax error at a byte offset of the VPD.
func vpdError(off int, format string, args ...any) error {
	return fmt.Errorf("%w: VPD at byte %d: %s", ErrSyntax, off, fmt.Sprintf(format, args...))
}

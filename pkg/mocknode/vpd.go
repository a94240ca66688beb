package mocknode

import "encoding/binary"

// VPD resource tags as the PCI specification (3.0, Appendix I) numbers them.
const (
	vpdTagIDString = 0x82 // large resource: identifier string
	vpdTagReadOnly = 0x90 // large resource: read-only section (VPD-R)
	vpdTagEnd      = 0x78 // small resource: end tag
)

// Bytes encodes v as a vpd file holds it: the identifier string, the read-only section
// with PN, SN, V3 and VU where set and the checksum keyword RV last, and the end tag. RV
// holds the byte that makes all bytes from the start through itself sum to zero, as the
// specification requires.
func (v *VPD) Bytes() []byte {
	out := vpdLarge(nil, vpdTagIDString, []byte(v.ProductName))
	var ro []byte
	for _, kv := range [][2]string{{"PN", v.PartNumber}, {"SN", v.SerialNumber}, {"V3", v.UUID}, {"VU", v.FunctionID}} {
		if kv[1] != "" {
			ro = append(append(ro, kv[0][0], kv[0][1], byte(len(kv[1]))), kv[1]...)
		}
	}
	ro = append(ro, 'R', 'V', 1, 0) // the checksum byte, filled in below
	out = vpdLarge(out, vpdTagReadOnly, ro)
	var sum byte
	for _, b := range out[:len(out)-1] {
		sum += b
	}
	out[len(out)-1] = -sum
	return append(out, vpdTagEnd)
}

// vpdLarge appends a large resource: tag, 16-bit little-endian length, data.
func vpdLarge(out []byte, tag byte, data []byte) []byte {
	out = append(out, tag, 0, 0)
	binary.LittleEndian.PutUint16(out[len(out)-2:], uint16(len(data)))
	return append(out, data...)
}

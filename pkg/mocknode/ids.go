package mocknode

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
)

// FormatGID writes a GID as sysfs does: eight groups of four hex digits, never compressed.
func FormatGID(b [16]byte) string {
	groups := make([]string, 8)
	for i := range groups {
		groups[i] = fmt.Sprintf("%04x", binary.BigEndian.Uint16(b[2*i:]))
	}
	return strings.Join(groups, ":")
}

// GUID formats a 64-bit GUID as node_guid and sys_image_guid do: 7c8c:0903:00c3:cfee.
func GUID(v uint64) string {
	return fmt.Sprintf("%04x:%04x:%04x:%04x", v>>48, (v>>32)&0xffff, (v>>16)&0xffff, v&0xffff)
}

// MAC formats a 48-bit hardware address, the low 48 bits of v.
func MAC(v uint64) string {
	b := make([]string, 6)
	for i := range b {
		b[i] = fmt.Sprintf("%02x", (v>>(8*(5-i)))&0xff)
	}
	return strings.Join(b, ":")
}

// MACToGUID is the EUI-64 a RoCE adapter derives from its MAC (ff:fe inserted, the
// universal/local bit flipped), which is also the interface ID of its link-local GID.
func MACToGUID(mac uint64) uint64 {
	hi := (mac >> 24) & 0xffffff
	lo := mac & 0xffffff
	return (hi^0x020000)<<40 | 0xfffe<<24 | lo
}

// IPoIBAddress is the 20-byte hardware address of an IPoIB interface: the QPN (with the
// connected-mode flag byte) followed by the port GID (subnet prefix and port GUID).
func IPoIBAddress(qpn uint32, portGUID uint64) string {
	var b [20]byte
	binary.BigEndian.PutUint32(b[0:], qpn&0xffffff)
	copy(b[4:], LinkLocalGID(portGUID).AsSlice())
	parts := make([]string, len(b))
	for i, v := range b {
		parts[i] = fmt.Sprintf("%02x", v)
	}
	return strings.Join(parts, ":")
}

// LinkLocalGID is fe80::<guid>, the default-subnet GID of an InfiniBand port and the
// link-local GID of a RoCE port.
func LinkLocalGID(guid uint64) netip.Addr {
	var b [16]byte
	b[0], b[1] = 0xfe, 0x80
	binary.BigEndian.PutUint64(b[8:], guid)
	return netip.AddrFrom16(b)
}

// IPv4GID is the IPv4-mapped GID ::ffff:a.b.c.d of a RoCE port with that address; it
// panics on a malformed address, as it is meant for literals in profiles.
func IPv4GID(ip string) netip.Addr {
	a := netip.MustParseAddr(ip)
	if !a.Is4() {
		panic(fmt.Sprintf("mocknode: %s is not an IPv4 address", ip))
	}
	return netip.AddrFrom16(a.As16())
}

// RoCEGIDs is the GID table a RoCE port gets from its netdev with the kernel's default GID
// population: the link-local GID as RoCE v1 and v2 at 0 and 1, then one v1/v2 pair per
// address (IPv4 given as a.b.c.d, IPv6 as usual) from index 2. An IPv4 address first thus
// yields GID index 3, the value NCCL_IB_GID_INDEX usually has.
func RoCEGIDs(ndev string, linkLocal netip.Addr, addrs ...string) []GID {
	gids := []GID{
		{Index: 0, GID: linkLocal, Type: GIDTypeRoCEv1, Ndev: ndev},
		{Index: 1, GID: linkLocal, Type: GIDTypeRoCEv2, Ndev: ndev},
	}
	for i, s := range addrs {
		a := netip.MustParseAddr(s)
		if a.Is4() {
			a = IPv4GID(s)
		}
		gids = append(gids,
			GID{Index: 2 + 2*i, GID: a, Type: GIDTypeRoCEv1, Ndev: ndev},
			GID{Index: 3 + 2*i, GID: a, Type: GIDTypeRoCEv2, Ndev: ndev})
	}
	return gids
}

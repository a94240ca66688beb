package discovery

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// GIDEntry is one valid entry of a port's GID table, as show_gids prints it.
type GIDEntry struct {
	// Index is the entry's index in the table.
	Index int
	// GID is the entry's value.
	GID sysfs.GID
	// Type is the RoCE version ("IB/RoCE v1", "RoCE v2"); empty when unreadable.
	Type sysfs.GIDType
	// Netdev is the interface the entry belongs to; empty on InfiniBand.
	Netdev string
}

// GIDTable is a port's GID table with the driver's choice of GID index.
type GIDTable struct {
	// Entries are the valid entries, by index: all-zero entries are left out.
	Entries []GIDEntry
	// Index is the GID index the driver publishes (sysfs.md's rule); nil for none.
	Index *int
	// Reason says why Index is what it is, in a short phrase.
	Reason string
}

// ReadGIDTable reads the GID table of port of ibdev below the sysfs root and applies
// the GID index rule, the same as Discover does, explaining its choice.
func ReadGIDTable(root, ibdev string, port int) (*GIDTable, error) {
	f, err := sysfs.Open(root)
	if err != nil {
		return nil, fmt.Errorf("read GID table: %w", err)
	}
	pdir := "class/infiniband/" + ibdev + "/ports/" + strconv.Itoa(port)
	ll, _ := sysfs.Read(f, pdir+"/link_layer", sysfs.ParseLinkLayer)
	names, err := f.ReadDirNames(pdir + "/gids")
	if err != nil {
		return nil, fmt.Errorf("read GID table of %s/%d: %w", ibdev, port, err)
	}
	t := &GIDTable{}
	var rule []gidEntry
	for _, nb := range numberedNames(names, "") {
		i := strconv.Itoa(nb.num)
		gid, err := sysfs.Read(f, pdir+"/gids/"+i, sysfs.ParseGID)
		if err != nil || gid.IsZero() {
			continue
		}
		e := GIDEntry{Index: nb.num, GID: gid}
		// An unused entry's type cannot be read; a used entry's type can.
		if typ, err := sysfs.Read(f, pdir+"/gid_attrs/types/"+i, sysfs.ParseGIDType); err == nil {
			e.Type = typ
			rule = append(rule, gidEntry{index: nb.num, typ: typ, gid: gid})
		} else if errors.Is(err, sysfs.ErrSyntax) {
			continue
		}
		e.Netdev, _ = sysfs.Read(f, pdir+"/gid_attrs/ndevs/"+i, sysfs.ParseIfName)
		t.Entries = append(t.Entries, e)
	}
	t.Index, t.Reason = explainGIDIndex(ll, rule)
	return t, nil
}

// explainGIDIndex is gidIndex with the reason for its answer.
func explainGIDIndex(linkLayer string, entries []gidEntry) (*int, string) {
	if linkLayer == LinkLayerInfiniBand {
		return nil, "InfiniBand: a GID index applies to RoCE only"
	}
	idx := gidIndex(entries)
	v2 := false
	for _, e := range entries {
		v2 = v2 || e.typ == sysfs.GIDTypeRoCEv2
	}
	switch {
	case idx != nil:
		for _, e := range entries {
			if e.index == *idx && e.gid.IsIPv4Mapped() {
				return idx, "lowest RoCE v2 entry with an IPv4 address"
			}
		}
		return idx, "lowest RoCE v2 entry with a global IPv6 address (none has IPv4)"
	case len(entries) == 0:
		return nil, "no valid GID entry: the netdev has no address or is down"
	case !v2:
		return nil, "no RoCE v2 entry (RoCE v1 only)"
	}
	return nil, "no RoCE v2 entry with an IPv4 or global IPv6 address (link-local only)"
}

// GIDIndexReason explains an inventory port's GID index (or its absence) without
// reading sysfs again: the short form for the discover table.
func GIDIndexReason(p *Port) string {
	switch {
	case p.LinkLayer == LinkLayerInfiniBand:
		return "n/a (IB)"
	case p.LinkLayer != LinkLayerEthernet:
		return "link layer unknown"
	case p.GIDIndex != nil:
		return ""
	}
	return "no usable GID"
}

// FreeGIDEntries counts the free entries of the GID table of port of ibdev below the
// sysfs root: those whose gids/<i> reads as all zeros. The kernel adds entries for every
// address of a netdev on the port, upper devices (macvlan, ipvlan) included, and the
// table's size is fixed by the adapter, so a caller about to add addresses checks here
// that their entries fit. An entry that cannot be read or parsed counts as used.
func FreeGIDEntries(root, ibdev string, port int) (int, error) {
	if _, err := sysfs.ParseDeviceName(ibdev); err != nil {
		return 0, fmt.Errorf("count free GID entries: %w", err)
	}
	if port < 1 {
		return 0, fmt.Errorf("count free GID entries of %s: port %d out of range", ibdev, port)
	}
	f, err := sysfs.Open(root) // a new FS per count: FS caches listings
	if err != nil {
		return 0, fmt.Errorf("count free GID entries: %w", err)
	}
	dir := "class/infiniband/" + ibdev + "/ports/" + strconv.Itoa(port) + "/gids"
	names, err := f.ReadDirNames(dir)
	if err != nil {
		return 0, fmt.Errorf("count free GID entries of %s port %d: %w", ibdev, port, err)
	}
	free := 0
	for _, nb := range numberedNames(names, "") {
		if gid, err := sysfs.Read(f, dir+"/"+nb.name, sysfs.ParseGID); err == nil && gid.IsZero() {
			free++
		}
	}
	return free, nil
}

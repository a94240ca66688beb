package discovery

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// port fills the facts of port p.Port of the device below dir. parent is the netdev of a
// virtual device, empty otherwise.
func (s *scan) port(p *Port, dir, parent string) {
	pdir := dir + "/ports/" + strconv.Itoa(p.Port)
	p.State, _ = read(s, pdir+"/state", sysfs.ParsePortState)
	p.PhysState, _ = read(s, pdir+"/phys_state", sysfs.ParsePhysState)
	if rate, ok := read(s, pdir+"/rate", text); ok {
		// Garbage is not passed on as the raw text either: both facts become unknown.
		if gbps, err := sysfs.ParseRate(rate); err == nil {
			p.Rate, p.SpeedGbps = rate, &gbps
		} else {
			s.unknown(pdir+" speed", fmt.Errorf("parse %s/rate: %w", pdir, err))
		}
	}
	ll, ok := read(s, pdir+"/link_layer", sysfs.ParseLinkLayer)
	if !ok {
		ll = LinkLayerUnknown
	}
	p.LinkLayer = ll

	switch {
	case p.Virtual:
		p.Netdev = parent
		if ll == LinkLayerEthernet {
			_, p.GIDIndex = s.gidTable(pdir)
		}
	case ll == LinkLayerEthernet:
		ndev, idx := s.gidTable(pdir)
		p.GIDIndex = idx
		if ndev == "" {
			// No valid GID entry names a netdev (an interface that is down has none):
			// fall back to the function's interface for this port, as ibdev2netdev does.
			ndev = s.functionNetdev(dir, p.Port)
		}
		p.Netdev = s.bondMaster(ndev)
		if p.Netdev != ndev || s.isBond(p.Netdev) {
			p.LAG = true // the port's interface is enslaved, or the GIDs are the bond's
		}
	case ll == LinkLayerInfiniBand:
		p.Netdev = s.functionNetdev(dir, p.Port)
		if lid, ok := readOptional(s, pdir+"/lid", sysfs.ParseLID); ok {
			v := int(lid)
			p.LID = &v
		}
		if lid, ok := readOptional(s, pdir+"/sm_lid", sysfs.ParseLID); ok {
			v := int(lid)
			p.SMLID = &v
		}
	}
	if gid, ok := readOptional(s, pdir+"/gids/0", sysfs.ParseGID); ok && !gid.IsZero() {
		p.PortGUID = interfaceID(gid)
	}
	if p.Netdev != "" {
		if mtu, ok := read(s, "class/net/"+p.Netdev+"/mtu", sysfs.ParseDecimal); ok {
			p.MTU = &mtu
		}
		p.NetdevOperState, _ = readOptional(s, "class/net/"+p.Netdev+"/operstate", sysfs.ParseIfName)
	}
}

// interfaceID is the lower 64 bits of a GID in the node_guid notation: the port GUID
// of an InfiniBand port's GID 0.
func interfaceID(g sysfs.GID) string {
	return fmt.Sprintf("%02x%02x:%02x%02x:%02x%02x:%02x%02x", g[8], g[9], g[10], g[11], g[12], g[13], g[14], g[15])
}

// gidEntry is one valid entry of a GID table. gid is read for RoCE v2 entries only, the
// only ones the GID index rule looks at.
type gidEntry struct {
	index int
	typ   sysfs.GIDType
	gid   sysfs.GID
}

// gidTable applies the layout's rules to the valid entries of a RoCE port's GID table: the
// port's netdev is the netdev of its lowest valid entry that has one, and its GID index
// the lowest RoCE v2 entry with an IPv4-mapped GID, else the lowest RoCE v2 entry with a
// global IPv6 GID, else none. The table may be sparse.
func (s *scan) gidTable(pdir string) (ndev string, index *int) {
	// A valid entry has a readable type. On a real node every index has a types file
	// whose read fails when unused; fixtures leave those files out. Listing types rather
	// than gids visits only the valid entries of a fixture and no more than gids on a host.
	names, err := s.fs.ReadDirNames(pdir + "/gid_attrs/types")
	if err != nil {
		s.unknown(pdir+" GID types", err)
		return "", nil
	}
	var entries []gidEntry
	for _, nb := range numberedNames(names, "") {
		i := strconv.Itoa(nb.num)
		typ, err := sysfs.Read(s.fs, pdir+"/gid_attrs/types/"+i, sysfs.ParseGIDType)
		if err != nil {
			if errors.Is(err, sysfs.ErrSyntax) {
				s.unknown(pdir+" GID type "+i, err)
			}
			continue // unused entry
		}
		e := gidEntry{index: nb.num, typ: typ}
		if typ == sysfs.GIDTypeRoCEv2 {
			gid, ok := read(s, pdir+"/gids/"+i, sysfs.ParseGID)
			if !ok || gid.IsZero() {
				continue
			}
			e.gid = gid
		}
		entries = append(entries, e)
	}
	for _, e := range entries {
		i := strconv.Itoa(e.index)
		if nd, ok := readOptional(s, pdir+"/gid_attrs/ndevs/"+i, sysfs.ParseIfName); ok {
			ndev = nd
			break
		}
	}
	return ndev, gidIndex(entries)
}

// gidIndex is the GID index rule over sorted valid entries. Link-local and all-zero
// entries never count.
func gidIndex(entries []gidEntry) *int {
	for _, want := range []func(sysfs.GID) bool{sysfs.GID.IsIPv4Mapped, sysfs.GID.IsGlobalIPv6} {
		for _, e := range entries {
			if e.typ == sysfs.GIDTypeRoCEv2 && e.gid.IsRoutable() && want(e.gid) {
				idx := e.index
				return &idx
			}
		}
	}
	return nil
}

// functionNetdev returns the interface of the device's PCI function whose dev_port is
// port-1 (the IPoIB interface of an InfiniBand port), or "" if there is none. Interfaces
// are tried in name order, so a P_Key child (ib0.8001) never wins over its parent.
func (s *scan) functionNetdev(dir string, port int) string {
	netDir := dir + "/device/net"
	names, err := s.fs.ReadDirNames(netDir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			s.unknown(netDir, err)
		}
		return ""
	}
	for _, name := range names {
		if _, err := sysfs.ParseIfName(name); err != nil {
			continue
		}
		dp, ok := read(s, netDir+"/"+name+"/dev_port", sysfs.ParseDecimal)
		if ok && dp == port-1 {
			return name
		}
	}
	return ""
}

// bondMaster returns the bond ndev is enslaved to, or ndev itself. The kernel moves the
// GIDs of a bond's slaves to the bond, so the bond is the port's netdev; a bridge master
// does not take the GIDs and is not followed.
func (s *scan) bondMaster(ndev string) string {
	if ndev == "" {
		return ""
	}
	master, err := s.fs.LinkBase("class/net/" + ndev + "/master")
	if err != nil {
		return ndev
	}
	if _, err := sysfs.ParseIfName(master); err != nil || !s.isBond(master) {
		return ndev
	}
	return master
}

// isBond reports whether ndev is a bonding master.
func (s *scan) isBond(ndev string) bool {
	return ndev != "" && s.fs.Exists("class/net/"+ndev+"/bonding")
}

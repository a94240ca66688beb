package netattach

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeNamespaces opens the fake world's namespaces.
type fakeNamespaces struct{ w *fakeWorld }

func (f fakeNamespaces) Host(context.Context) (Namespace, error) {
	return f.Open(context.Background(), "/host")
}

func (f fakeNamespaces) Open(_ context.Context, path string) (Namespace, error) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	fd, ok := f.w.paths[path]
	if !ok {
		return nil, fmt.Errorf("%s: %w", path, ErrNamespaceGone)
	}
	return fakeNS{h: &fakeHandle{w: f.w, ns: fd}}, nil
}

type fakeNS struct{ h *fakeHandle }

func (n fakeNS) Netlink() Netlink { return n.h }
func (n fakeNS) FD() int          { return n.h.ns }
func (n fakeNS) ID() string       { return fmt.Sprint(n.h.ns) }
func (n fakeNS) Close() error     { return nil }

// fakeHandle is a Netlink bound to one fake namespace.
type fakeHandle struct {
	w  *fakeWorld
	ns int
}

func (h *fakeHandle) object(l *fakeLink) netlink.Link {
	a := l.attrs
	a.HardwareAddr = slices.Clone(l.attrs.HardwareAddr)
	a.PermHWAddr = slices.Clone(l.attrs.PermHWAddr)
	switch l.kind {
	case "bond":
		return &netlink.Bond{LinkAttrs: a}
	case "veth":
		return &netlink.Veth{LinkAttrs: a}
	case "macvlan":
		return &netlink.Macvlan{LinkAttrs: a, Mode: netlink.MACVLAN_MODE_BRIDGE}
	case "ipvlan":
		return &netlink.IPVlan{LinkAttrs: a, Mode: netlink.IPVLAN_MODE_L2}
	case "ipoib":
		return &netlink.IPoIB{LinkAttrs: a, Pkey: l.pkey}
	case "vlan":
		return &netlink.Vlan{LinkAttrs: a}
	case "bridge":
		return &netlink.Bridge{LinkAttrs: a}
	}
	return &netlink.Device{LinkAttrs: a}
}

func notFound(what string) error { return fmt.Errorf("link %s not found: %w", what, syscall.ENODEV) }

// find resolves a link argument the way netlink does: by index, else by name.
func (h *fakeHandle) find(link netlink.Link) (*fakeLink, error) {
	a := link.Attrs()
	if a.Index != 0 {
		if l := h.w.links[a.Index]; l != nil && l.ns == h.ns {
			return l, nil
		}
		return nil, notFound(fmt.Sprint(a.Index))
	}
	if l := h.w.byName(h.ns, a.Name); l != nil {
		return l, nil
	}
	return nil, notFound(a.Name)
}

func (h *fakeHandle) LinkByName(name string) (netlink.Link, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if l := h.w.byName(h.ns, name); l != nil {
		return h.object(l), nil
	}
	return nil, notFound(name)
}

func (h *fakeHandle) LinkByIndex(index int) (netlink.Link, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if l := h.w.links[index]; l != nil && l.ns == h.ns {
		return h.object(l), nil
	}
	return nil, notFound(fmt.Sprint(index))
}

func (h *fakeHandle) LinkList() ([]netlink.Link, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	var out []netlink.Link
	for _, l := range h.w.sortedLinks(h.ns) {
		out = append(out, h.object(l))
	}
	return out, nil
}

func (h *fakeHandle) LinkAdd(link netlink.Link) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if err := h.w.step("LinkAdd " + link.Attrs().Name); err != nil {
		return err
	}
	a := link.Attrs()
	if err := validIfName(a.Name); err != nil {
		return fmt.Errorf("%v: %w", err, syscall.EINVAL)
	}
	dest := h.ns // IFLA_NET_NS_FD: the parent is looked up here, the link made there
	if fd, ok := a.Namespace.(netlink.NsFd); ok {
		dest = int(fd)
	}
	if h.w.byName(dest, a.Name) != nil {
		return syscall.EEXIST
	}
	parent := h.w.links[a.ParentIndex]
	if parent == nil || parent.ns != h.ns {
		return fmt.Errorf("parent %d: %w", a.ParentIndex, syscall.EINVAL)
	}
	l := &fakeLink{ns: dest, kind: link.Type(), attrs: netlink.LinkAttrs{Name: a.Name, Index: h.w.nextIndex, ParentIndex: parent.attrs.Index, MTU: a.MTU, NetNsID: -1}}
	h.w.nextIndex++
	switch l.kind {
	case "macvlan", "ipvlan":
		if parent.kind == "ipoib" {
			return fmt.Errorf("%s on a non-Ethernet parent: %w", l.kind, syscall.EINVAL)
		}
		if l.kind == "macvlan" {
			h.w.nextMAC++
			l.attrs.HardwareAddr = macFrom(h.w.nextMAC)
		} else {
			l.attrs.HardwareAddr = slices.Clone(parent.attrs.HardwareAddr)
		}
	case "ipoib":
		if parent.kind != "ipoib" {
			return fmt.Errorf("ipoib child on a non-IPoIB parent: %w", syscall.EINVAL)
		}
		l.pkey = link.(*netlink.IPoIB).Pkey
		l.attrs.HardwareAddr = ipoibAddr(uint64(l.attrs.Index))
	default:
		return fmt.Errorf("fake cannot create %s links: %w", l.kind, syscall.EOPNOTSUPP)
	}
	if l.attrs.MTU == 0 {
		l.attrs.MTU = parent.attrs.MTU
	}
	if l.attrs.MTU > parent.attrs.MTU {
		return fmt.Errorf("mtu above the parent's: %w", syscall.EINVAL)
	}
	h.w.links[l.attrs.Index] = l
	return nil
}

func macFrom(v uint64) net.HardwareAddr {
	b := make(net.HardwareAddr, 6)
	for i := range 6 {
		b[5-i] = byte(v >> (8 * i))
	}
	b[0] = b[0]&^1 | 2 // locally administered unicast, like the kernel's random MACs
	return b
}

// mutate runs f on the link after counting the operation.
func (h *fakeHandle) mutate(op string, link netlink.Link, f func(*fakeLink) error) error {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if err := h.w.step(op + " " + link.Attrs().Name); err != nil {
		return err
	}
	l, err := h.find(link)
	if err != nil {
		return err
	}
	return f(l)
}

func (h *fakeHandle) LinkDel(link netlink.Link) error {
	return h.mutate("LinkDel", link, func(l *fakeLink) error {
		if l.kind == "device" {
			return fmt.Errorf("cannot delete a physical link: %w", syscall.EOPNOTSUPP)
		}
		h.w.delete(l)
		return nil
	})
}

func (h *fakeHandle) LinkSetUp(link netlink.Link) error {
	return h.mutate("LinkSetUp", link, func(l *fakeLink) error {
		if l.attrs.Flags&net.FlagUp == 0 {
			l.attrs.Flags |= net.FlagUp
			for _, p := range l.addrs {
				l.addPrefixRoute(p)
			}
		}
		return nil
	})
}

func (l *fakeLink) addPrefixRoute(p netip.Prefix) {
	if p.Addr().Is4() {
		l.routes = append(l.routes, fakeRoute{dst: p.Masked(), src: p.Addr(), proto: unix.RTPROT_KERNEL})
	}
}

func (h *fakeHandle) LinkSetDown(link netlink.Link) error {
	return h.mutate("LinkSetDown", link, func(l *fakeLink) error {
		l.attrs.Flags &^= net.FlagUp
		l.routes = nil
		return nil
	})
}

func (h *fakeHandle) LinkSetName(link netlink.Link, name string) error {
	return h.mutate("LinkSetName", link, func(l *fakeLink) error {
		if err := validIfName(name); err != nil {
			return syscall.EINVAL
		}
		if l.attrs.Flags&net.FlagUp != 0 {
			return syscall.EBUSY
		}
		if o := h.w.byName(h.ns, name); o != nil && o != l {
			return syscall.EEXIST
		}
		l.attrs.Name = name
		return nil
	})
}

func (h *fakeHandle) LinkSetMTU(link netlink.Link, mtu int) error {
	return h.mutate("LinkSetMTU", link, func(l *fakeLink) error {
		if p := h.w.links[l.attrs.ParentIndex]; p != nil && mtu > p.attrs.MTU {
			return syscall.EINVAL
		}
		l.attrs.MTU = mtu
		return nil
	})
}

// LinkSetHardwareAddr needs the link down, as the kernel's eth_mac_addr does for
// drivers without IFF_LIVE_ADDR_CHANGE.
func (h *fakeHandle) LinkSetHardwareAddr(link netlink.Link, hw net.HardwareAddr) error {
	return h.mutate("LinkSetHardwareAddr", link, func(l *fakeLink) error {
		if l.attrs.Flags&net.FlagUp != 0 {
			return syscall.EBUSY
		}
		if len(hw) != len(l.attrs.HardwareAddr) {
			return syscall.EINVAL
		}
		l.attrs.HardwareAddr = slices.Clone(hw)
		return nil
	})
}

func (h *fakeHandle) LinkSetNsFd(link netlink.Link, fd int) error {
	return h.mutate("LinkSetNsFd", link, func(l *fakeLink) error {
		if l.kind == "bond" {
			return fmt.Errorf("bond devices are local to their namespace: %w", syscall.EINVAL)
		}
		if h.w.byName(fd, l.attrs.Name) != nil {
			return syscall.EEXIST
		}
		l.attrs.Flags &^= net.FlagUp
		l.addrs, l.routes = nil, nil
		l.ns = fd
		return nil
	})
}

// AddrList lists the addresses of link, or of every link of the namespace for nil.
func (h *fakeHandle) AddrList(link netlink.Link, family int) ([]netlink.Addr, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	links := h.w.sortedLinks(h.ns)
	if link != nil {
		l, err := h.find(link)
		if err != nil {
			return nil, err
		}
		links = []*fakeLink{l}
	}
	var out []netlink.Addr
	for _, l := range links {
		for _, p := range l.addrs {
			if family == netlink.FAMILY_ALL || (family == netlink.FAMILY_V4) == p.Addr().Is4() {
				out = append(out, netlink.Addr{IPNet: toIPNet(p), LinkIndex: l.attrs.Index, Flags: unix.IFA_F_PERMANENT})
			}
		}
	}
	return out, nil
}

func (h *fakeHandle) AddrAdd(link netlink.Link, addr *netlink.Addr) error {
	return h.mutate("AddrAdd", link, func(l *fakeLink) error {
		p, ok := fromIPNet(addr.IPNet)
		if !ok {
			return syscall.EINVAL
		}
		if slices.Contains(l.addrs, p) {
			return syscall.EEXIST
		}
		l.addrs = append(l.addrs, p)
		if l.attrs.Flags&net.FlagUp != 0 {
			l.addPrefixRoute(p)
		}
		return nil
	})
}

// RouteList lists the main table only, as netlink's does (it drops the other tables'
// routes unless a table filter asks for them).
func (h *fakeHandle) RouteList(link netlink.Link, family int) ([]netlink.Route, error) {
	filter, mask := &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE
	if link != nil {
		filter.LinkIndex = link.Attrs().Index
		mask |= netlink.RT_FILTER_OIF
	}
	return h.RouteListFiltered(family, filter, mask)
}

// RouteListFiltered supports the filters this package uses: the table (all of them for
// RT_TABLE_UNSPEC, main only without RT_FILTER_TABLE, as netlink does) and the link.
func (h *fakeHandle) RouteListFiltered(family int, filter *netlink.Route, mask uint64) ([]netlink.Route, error) {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	if mask&^(netlink.RT_FILTER_TABLE|netlink.RT_FILTER_OIF) != 0 {
		return nil, fmt.Errorf("fake: route filter %#x: %w", mask, syscall.EOPNOTSUPP)
	}
	var out []netlink.Route
	for _, l := range h.w.sortedLinks(h.ns) {
		if mask&netlink.RT_FILTER_OIF != 0 && l.attrs.Index != filter.LinkIndex {
			continue
		}
		for _, r := range l.routes {
			if family != netlink.FAMILY_ALL && (family == netlink.FAMILY_V4) != r.dst.Addr().Is4() {
				continue
			}
			table := r.table
			if table == 0 {
				table = unix.RT_TABLE_MAIN
			}
			if mask&netlink.RT_FILTER_TABLE == 0 && table != unix.RT_TABLE_MAIN ||
				mask&netlink.RT_FILTER_TABLE != 0 && filter.Table != unix.RT_TABLE_UNSPEC && table != filter.Table {
				continue
			}
			nr := netlink.Route{LinkIndex: l.attrs.Index, Dst: toIPNet(r.dst), Priority: r.priority, Table: r.table, Protocol: netlink.RouteProtocol(r.proto)}
			if r.gw.IsValid() {
				nr.Gw = net.IP(r.gw.AsSlice())
			}
			if r.src.IsValid() {
				nr.Src = net.IP(r.src.AsSlice())
			}
			if nr.Table == 0 {
				nr.Table = unix.RT_TABLE_MAIN
			}
			out = append(out, nr)
		}
	}
	return out, nil
}

func (h *fakeHandle) RouteAdd(route *netlink.Route) error {
	return h.mutate("RouteAdd", &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: route.LinkIndex}}, func(l *fakeLink) error {
		if l.attrs.Flags&net.FlagUp == 0 {
			return syscall.ENETDOWN
		}
		dst, ok := fromIPNet(route.Dst)
		if !ok {
			return syscall.EINVAL
		}
		r := fakeRoute{dst: dst.Masked(), gw: fromIP(route.Gw), src: fromIP(route.Src), priority: route.Priority, table: route.Table, proto: int(route.Protocol)}
		if r.proto == 0 {
			r.proto = unix.RTPROT_BOOT // what the kernel records for a route added without one
		}
		if r.table == unix.RT_TABLE_MAIN {
			r.table = 0
		}
		if r.gw.IsValid() && !slices.ContainsFunc(l.addrs, func(p netip.Prefix) bool { return p.Masked().Contains(r.gw) }) {
			return syscall.ENETUNREACH
		}
		for _, o := range l.routes {
			if o.dst == r.dst && o.table == r.table && o.priority == r.priority {
				return syscall.EEXIST
			}
		}
		l.routes = append(l.routes, r)
		return nil
	})
}

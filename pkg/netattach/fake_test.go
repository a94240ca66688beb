package netattach

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/vishvananda/netlink"
)

// fakeWorld is an in-memory model of the kernel's network namespaces, as far as this
// package uses them, with the kernel's rules that matter to attach and detach:
// names are unique per namespace and renaming needs the link down; a move between
// namespaces brings the link down and flushes its addresses and routes; bonds cannot
// move; children (macvlan, ipvlan, IPoIB) die with their namespace or their parent,
// physical links return to the root namespace (renamed devN if their name is taken);
// routes need the link up and a reachable gateway; links going down lose their routes.
type fakeWorld struct {
	mu        sync.Mutex
	nextIndex int
	nextMAC   uint64
	paths     map[string]int // netns path -> fd
	links     map[int]*fakeLink
	// failAt fails the failAt-th mutating operation (counting from 1) with EIO.
	failAt, opCount int
	ops             []string
	// limbo holds physical links whose namespace died until finishReturn (the kernel
	// returns them from a workqueue); only when deferReturn is set.
	deferReturn bool
	limbo       []*fakeLink
}

const rootFD = 1

type fakeLink struct {
	ns     int
	kind   string // device, bond, veth, macvlan, ipvlan, ipoib
	attrs  netlink.LinkAttrs
	pkey   uint16
	addrs  []netip.Prefix
	routes []fakeRoute
}

type fakeRoute struct {
	dst      netip.Prefix
	gw, src  netip.Addr
	priority int
	table    int
	proto    int
}

func newFakeWorld() *fakeWorld {
	return &fakeWorld{nextIndex: 1, nextMAC: 0x0a5800000001, paths: map[string]int{"/host": rootFD}, links: map[int]*fakeLink{}}
}

// addNS creates a pod namespace reachable at path.
func (w *fakeWorld) addNS(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.paths[path] = 100 + len(w.paths)
}

// addLink adds a link directly (fixture building, not counted as an operation).
func (w *fakeWorld) addLink(ns int, kind, name, mac string, mtu int, up bool, master string) *fakeLink {
	w.mu.Lock()
	defer w.mu.Unlock()
	hw, err := net.ParseMAC(mac)
	if err != nil && kind != "ipoib" {
		panic(err)
	}
	// NetNsID -1: the kernel sends IFLA_LINK_NETNSID only for a link whose IFLA_LINK
	// is in another namespace (a veth's peer, a child of a foreign parent).
	l := &fakeLink{ns: ns, kind: kind, attrs: netlink.LinkAttrs{Name: name, Index: w.nextIndex, HardwareAddr: hw, MTU: mtu, NetNsID: -1}}
	if kind == "ipoib" {
		l.attrs.HardwareAddr = ipoibAddr(uint64(w.nextIndex))
	}
	if kind == "device" || kind == "ipoib" {
		// What the driver of a physical netdev gives it and nobody can change: its PCI
		// function and (Ethernet) its burnt-in address, which a bond slave keeps when it
		// takes the bond's MAC.
		l.attrs.ParentDev, l.attrs.ParentDevBus = fmt.Sprintf("0000:%02x:00.0", w.nextIndex), "pci"
		if kind == "device" {
			l.attrs.PermHWAddr = slices.Clone(hw)
			if master != "" {
				l.attrs.PermHWAddr = net.HardwareAddr{0x00, 0x00, 0x5e, 0x00, 0x53, byte(w.nextIndex)}
			}
		}
	}
	w.nextIndex++
	if up {
		l.attrs.Flags = net.FlagUp
	}
	if master != "" {
		l.attrs.MasterIndex = w.byName(ns, master).attrs.Index
	}
	w.links[l.attrs.Index] = l
	return l
}

func ipoibAddr(v uint64) net.HardwareAddr {
	b := make(net.HardwareAddr, 20)
	b[1], b[2], b[3] = 0x00, 0x10, 0x49
	for i := range 8 {
		b[19-i] = byte(v >> (8 * i))
	}
	return b
}

func (w *fakeWorld) byName(ns int, name string) *fakeLink {
	for _, l := range w.links {
		if l.ns == ns && l.attrs.Name == name {
			return l
		}
	}
	return nil
}

// step counts a mutating operation and fails the chosen one.
func (w *fakeWorld) step(op string) error {
	w.opCount++
	w.ops = append(w.ops, op)
	if w.failAt == w.opCount {
		return fmt.Errorf("injected failure of %s: %w", op, syscall.EIO)
	}
	return nil
}

// killNS destroys the namespace at path, as the kernel does when its last user goes.
func (w *fakeWorld) killNS(path string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	fd := w.paths[path]
	delete(w.paths, path)
	for _, l := range w.sortedLinks(fd) {
		switch {
		case l.kind == "device" || (l.kind == "ipoib" && l.attrs.ParentIndex == 0):
			l.attrs.Flags &^= net.FlagUp
			l.addrs, l.routes = nil, nil
			l.ns = -1
			if w.deferReturn {
				w.limbo = append(w.limbo, l)
			} else {
				w.returnToRoot(l)
			}
		default:
			w.delete(l)
		}
	}
}

func (w *fakeWorld) returnToRoot(l *fakeLink) {
	if w.byName(rootFD, l.attrs.Name) != nil {
		l.attrs.Name = fmt.Sprintf("dev%d", l.attrs.Index)
	}
	l.ns = rootFD
}

// finishReturn lets the links of dead namespaces arrive in the root namespace.
func (w *fakeWorld) finishReturn() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, l := range w.limbo {
		w.returnToRoot(l)
	}
	w.limbo = nil
}

func (w *fakeWorld) delete(l *fakeLink) {
	delete(w.links, l.attrs.Index)
	for _, c := range w.links {
		if c.attrs.ParentIndex == l.attrs.Index && c.kind != "device" {
			w.delete(c)
		}
	}
}

func (w *fakeWorld) sortedLinks(ns int) []*fakeLink {
	var out []*fakeLink
	for _, l := range w.links {
		if l.ns == ns {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].attrs.Index < out[j].attrs.Index })
	return out
}

// dump is a canonical text of one namespace (no ifindexes: children get new ones).
func (w *fakeWorld) dump(path string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	fd, ok := w.paths[path]
	if !ok {
		return "<gone>"
	}
	var b strings.Builder
	for _, l := range w.sortedLinks(fd) {
		parent, master := "", ""
		if p := w.links[l.attrs.ParentIndex]; p != nil {
			parent = p.attrs.Name
		}
		if m := w.links[l.attrs.MasterIndex]; m != nil {
			master = m.attrs.Name
		}
		addrs := make([]string, 0, len(l.addrs))
		for _, a := range l.addrs {
			addrs = append(addrs, a.String())
		}
		slices.Sort(addrs)
		routes := make([]string, 0, len(l.routes))
		for _, r := range l.routes {
			routes = append(routes, fmt.Sprintf("%s gw %s src %s metric %d table %d proto %d", r.dst, r.gw, r.src, r.priority, r.table, r.proto))
		}
		slices.Sort(routes)
		fmt.Fprintf(&b, "%s %s mac=%s mtu=%d up=%v parent=%s master=%s pkey=%#x addrs=%v routes=%v\n",
			l.attrs.Name, l.kind, l.attrs.HardwareAddr, l.attrs.MTU, l.attrs.Flags&net.FlagUp != 0, parent, master, l.pkey, addrs, routes)
	}
	return b.String()
}

// addRoute adds a fixture route of the main table directly.
func (w *fakeWorld) addRoute(l *fakeLink, dst, gw string, proto int) {
	w.addTableRoute(l, 0, dst, gw, proto)
}

// addTableRoute adds a fixture route of a table (0 for main) directly.
func (w *fakeWorld) addTableRoute(l *fakeLink, table int, dst, gw string, proto int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := fakeRoute{dst: netip.MustParsePrefix(dst), proto: proto, table: table}
	if gw != "" {
		r.gw = netip.MustParseAddr(gw)
	}
	l.routes = append(l.routes, r)
}

func (w *fakeWorld) addAddr(l *fakeLink, p string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l.addrs = append(l.addrs, netip.MustParsePrefix(p))
	if l.attrs.Flags&net.FlagUp != 0 {
		l.addPrefixRoute(netip.MustParsePrefix(p))
	}
}

// addChild adds an upper device of lower (a VLAN, macvlan or ipvlan: the kernel reports
// the lower as the child's IFLA_LINK) directly, for fixtures.
func (w *fakeWorld) addChild(ns int, kind, name, mac, lower string) *fakeLink {
	l := w.addLink(ns, kind, name, mac, 1500, true, "")
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.byName(ns, lower)
	l.attrs.ParentIndex, l.attrs.MTU = p.attrs.Index, p.attrs.MTU
	return l
}

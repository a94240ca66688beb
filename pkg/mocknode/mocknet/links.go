package mocknet

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"

	"github.com/vishvananda/netlink"

	"github.com/rdma-dra/rdma-dra-driver/pkg/atomicfile"
)

// PeerPrefix starts the names of the host ends of veth stand-ins: rdmock0, rdmock1, ...
const PeerPrefix = "rdmock"

// peerMAC is the MAC of the Nth peer: locally administered, "rdm" in ASCII.
func peerMAC(n int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 'r', 'd', 'm', byte(n >> 8), byte(n)}
}

// CreateOptions say how to create the stand-ins.
type CreateOptions struct {
	// Kernel is what Probe found.
	Kernel Kernel
	// NodeIP is the node's address: no stand-in may carry an address of its subnet.
	NodeIP netip.Addr
	// Save persists the record of what exists so far; it is called before each link is
	// created and after, so a crash leaves a record of at least everything created.
	Save func(*Plan) error
	Log  *slog.Logger
}

// Create makes the plan's stand-ins in the namespace of h (the host's) and returns the
// record: the plan's links with their kinds and peers, those created. It refuses to
// start when a name is taken by an interface it did not create, or when an address would
// overlap a route of the host; leftovers of an earlier run (same name, kind and MAC) are
// deleted and made again.
func Create(h *netlink.Handle, plan *Plan, o CreateOptions) (*Plan, error) {
	portKind, err := o.Kernel.PortKind()
	if err != nil {
		return nil, err
	}
	rec := &Plan{}
	links := slices.Clone(plan.Links)
	peers := 0
	for i := range links {
		l := &links[i]
		switch {
		case l.Role == RoleBond && !o.Kernel[KindBridge]:
			return nil, fmt.Errorf("bond %s: the kernel has no bridge to stand in for it (%s)", l.Name, o.Kernel)
		case l.Role == RoleBond:
			l.Kind = KindBridge
		default:
			l.Kind = portKind
		}
		if l.Kind == KindVeth {
			l.Peer = fmt.Sprintf("%s%d", PeerPrefix, peers)
			l.PeerHardwareAddr = peerMAC(peers).String()
			peers++
		}
	}
	if err := checkHost(h, links, o.NodeIP); err != nil {
		return nil, err
	}
	for _, l := range links {
		for _, name := range []string{l.Name, l.Peer} {
			if err := clearLeftover(h, name, l, o.Log); err != nil {
				return nil, err
			}
		}
	}
	for _, l := range links {
		rec.Links = append(rec.Links, l)
		if err := o.Save(rec); err != nil {
			return rec, err
		}
		if err := createLink(h, l); err != nil {
			return rec, fmt.Errorf("create stand-in %s (%s): %w", l.Name, l.Kind, err)
		}
		o.Log.Info("mock netdev", "name", l.Name, "role", l.Role, "kind", l.Kind, "mac", l.HardwareAddr, "mtu", l.MTU, "addresses", l.Addresses, "peer", l.Peer)
	}
	return rec, o.Save(rec)
}

// createLink creates one stand-in, sets it up and gives it its addresses.
func createLink(h *netlink.Handle, l Link) error {
	hw, err := net.ParseMAC(l.HardwareAddr)
	if err != nil {
		return err
	}
	attrs := netlink.LinkAttrs{Name: l.Name, MTU: l.MTU, HardwareAddr: hw}
	var nl netlink.Link
	switch l.Kind {
	case KindVeth:
		peerHW, err := net.ParseMAC(l.PeerHardwareAddr)
		if err != nil {
			return err
		}
		nl = &netlink.Veth{LinkAttrs: attrs, PeerName: l.Peer, PeerHardwareAddr: peerHW, PeerMTU: uint32(l.MTU)}
	case KindDummy:
		nl = &netlink.Dummy{LinkAttrs: attrs}
	case KindBridge:
		nl = &netlink.Bridge{LinkAttrs: attrs}
	default:
		return fmt.Errorf("unknown kind %q", l.Kind)
	}
	if err := h.LinkAdd(nl); err != nil {
		return fmt.Errorf("add: %w", err)
	}
	link, err := h.LinkByName(l.Name)
	if err != nil {
		return err
	}
	if l.Master != "" {
		master, err := h.LinkByName(l.Master)
		if err != nil {
			return fmt.Errorf("bridge %s: %w", l.Master, err)
		}
		if err := h.LinkSetMaster(link, master); err != nil {
			return fmt.Errorf("enslave to %s: %w", l.Master, err)
		}
	}
	if l.Peer != "" {
		peer, err := h.LinkByName(l.Peer)
		if err != nil {
			return err
		}
		if err := h.LinkSetUp(peer); err != nil {
			return fmt.Errorf("set peer %s up: %w", l.Peer, err)
		}
	}
	for _, p := range l.Addresses {
		a := &netlink.Addr{IPNet: &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}}
		if err := h.AddrAdd(link, a); err != nil {
			return fmt.Errorf("add address %s: %w", p, err)
		}
	}
	if err := h.LinkSetUp(link); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	return nil
}

// ours reports whether link is the stand-in l (or its peer) by kind and MAC.
func ours(link netlink.Link, l Link) bool {
	mac := link.Attrs().HardwareAddr.String()
	switch link.Attrs().Name {
	case l.Peer:
		return link.Type() == KindVeth && mac == l.PeerHardwareAddr
	default:
		return link.Type() == l.Kind && mac == l.HardwareAddr
	}
}

// clearLeftover deletes the interface called name if it is a stand-in of an earlier
// run, and refuses if it is someone else's.
func clearLeftover(h *netlink.Handle, name string, l Link, log *slog.Logger) error {
	if name == "" {
		return nil
	}
	link, err := h.LinkByName(name)
	var nf netlink.LinkNotFoundError
	if errors.As(err, &nf) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("look up %s: %w", name, err)
	}
	if !ours(link, l) {
		return fmt.Errorf("the host has an interface %s (%s, %s) that is %w; the mock node's netdev of that name cannot be made: use another fixture or remove it",
			name, link.Type(), link.Attrs().HardwareAddr, errNotOurs)
	}
	log.Info("deleting a mock netdev left by an earlier run", "name", name)
	if err := h.LinkDel(link); err != nil {
		return fmt.Errorf("delete leftover %s: %w", name, err)
	}
	return nil
}

// checkHost refuses addresses that would overlap the node's own network or any route of
// an interface the tool does not create: the stand-ins must never carry the node IP or
// take traffic of the default route.
func checkHost(h *netlink.Handle, links []Link, nodeIP netip.Addr) error {
	mine := map[string]bool{}
	for _, l := range links {
		mine[l.Name], mine[l.Peer] = true, true
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list host routes: %w", err)
	}
	for _, l := range links {
		for _, p := range l.Addresses {
			if nodeIP.IsValid() && p.Masked().Contains(nodeIP) {
				return fmt.Errorf("mock netdev %s would get %s, the subnet of the node IP %s", l.Name, p, nodeIP)
			}
			for _, r := range routes {
				if r.Dst == nil {
					continue // the default route: more specific routes win, and none is ours
				}
				dst, ok := prefixOf(r.Dst)
				if !ok || dst.Bits() == 0 || !dst.Overlaps(p) {
					// netlink reports a default route as 0.0.0.0/0 (or ::/0), not nil.
					continue
				}
				name := ""
				if link, err := h.LinkByIndex(r.LinkIndex); err == nil {
					name = link.Attrs().Name
				}
				if !mine[name] {
					return fmt.Errorf("mock netdev %s would get %s, which overlaps the host's route to %s via %q", l.Name, p, dst, name)
				}
			}
		}
	}
	return nil
}

func prefixOf(n *net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	bits, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), bits).Masked(), true
}

// Remove deletes the stand-ins a record names, in reverse order, where it finds them with
// the recorded kind and MAC: under their name, or under a name the record does not have
// (a crashed driver may have renamed one). The members of a bond share one MAC, so a
// renamed one is looked for only among interfaces not yet deleted and not called by a
// recorded name: those are found by name, or are not ours. A recorded name now held by
// another interface is left alone. A stand-in that is gone (a veth end that moved into a
// pod whose namespace died goes with its peer) is fine.
func Remove(h *netlink.Handle, rec *Plan, log *slog.Logger) error {
	all, err := h.LinkList()
	if err != nil {
		return fmt.Errorf("list host links: %w", err)
	}
	recorded := map[string]bool{}
	for _, l := range rec.Links {
		recorded[l.Name], recorded[l.Peer] = true, true
	}
	deleted := map[int]bool{}
	var errs []error
	for i := len(rec.Links) - 1; i >= 0; i-- {
		l := rec.Links[i]
		var found netlink.Link
		for _, link := range all {
			if link.Attrs().Name == l.Name && ours(link, l) {
				found = link
				break
			}
		}
		if found == nil {
			for _, link := range all {
				a := link.Attrs()
				if link.Type() == l.Kind && a.HardwareAddr.String() == l.HardwareAddr && !recorded[a.Name] && !deleted[a.Index] {
					found = link
					break
				}
			}
		}
		if found == nil && l.Peer != "" {
			// The end left the host (moved into a pod that still exists): deleting the
			// peer deletes the pair.
			for _, link := range all {
				if link.Attrs().Name == l.Peer && ours(link, l) {
					found = link
					break
				}
			}
		}
		if found == nil {
			log.Info("mock netdev already gone", "name", l.Name)
			continue
		}
		if err := h.LinkDel(found); err != nil {
			var nf netlink.LinkNotFoundError
			if !errors.As(err, &nf) {
				errs = append(errs, fmt.Errorf("delete mock netdev %s: %w", found.Attrs().Name, err))
			}
			continue
		}
		deleted[found.Attrs().Index] = true
		log.Info("deleted mock netdev", "name", found.Attrs().Name, "peer", l.Peer)
	}
	return errors.Join(errs...)
}

// WriteRecord writes a record as JSON, replacing the file at once.
func WriteRecord(file string, rec *Plan) error {
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(file, append(data, '\n'), 0o644)
}

// ReadRecord reads a record; a missing file is an empty record.
func ReadRecord(file string) (*Plan, error) {
	data, err := os.ReadFile(file)
	if errors.Is(err, os.ErrNotExist) {
		return &Plan{}, nil
	}
	if err != nil {
		return nil, err
	}
	var rec Plan
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("parse %s: %w", file, err)
	}
	return &rec, nil
}

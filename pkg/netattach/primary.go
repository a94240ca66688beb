package netattach

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// ErrPrimaryInterface is wrapped by CheckNotPrimary's refusals.
var ErrPrimaryInterface = errors.New("netdev carries the node's own traffic")

// CheckNotPrimary refuses (with an error wrapping ErrPrimaryInterface that names the
// netdev and why) a netdev that carries the host's default route or one of nodeIPs,
// directly or through a bond: the netdev's bond master and, for a bond, its slaves count
// as the same link. Taking such a netdev away would cut the node off. Move mode calls it
// before it takes anything; the caller may call it earlier (at prepare) to fail fast.
func CheckNotPrimary(nl Netlink, netdev string, nodeIPs []netip.Addr) error {
	l, err := nl.LinkByName(netdev)
	if err != nil {
		return fmt.Errorf("look up %s: %w", netdev, err)
	}
	links, err := nl.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	related := relatedLinks(l, links)

	routes, err := nl.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list routes: %w", err)
	}
	for _, rt := range routes {
		if !isDefault(rt.Dst) {
			continue
		}
		idx := []int{rt.LinkIndex}
		for _, nh := range rt.MultiPath {
			idx = append(idx, nh.LinkIndex)
		}
		for _, i := range idx {
			if r, ok := related[i]; ok {
				return fmt.Errorf("refuse to take %s: %w: %s carries the default route (via %s)",
					netdev, ErrPrimaryInterface, r.Attrs().Name, fromIP(rt.Gw))
			}
		}
	}
	for _, idx := range slices.Sorted(maps.Keys(related)) {
		r := related[idx]
		addrs, err := nl.AddrList(r, netlink.FAMILY_ALL)
		if err != nil {
			return fmt.Errorf("list addresses of %s: %w", r.Attrs().Name, err)
		}
		for _, a := range addrs {
			p, ok := fromIPNet(a.IPNet)
			if ok && slices.Contains(nodeIPs, p.Addr()) {
				return fmt.Errorf("refuse to take %s: %w: %s has the node IP %s", netdev, ErrPrimaryInterface, r.Attrs().Name, p.Addr())
			}
		}
	}
	return nil
}

// relatedLinks is l, its master (a bond or bridge it is enslaved to), and its slaves,
// by index.
func relatedLinks(l netlink.Link, links []netlink.Link) map[int]netlink.Link {
	related := map[int]netlink.Link{l.Attrs().Index: l}
	for _, o := range links {
		switch {
		case o.Attrs().Index == l.Attrs().MasterIndex:
			related[o.Attrs().Index] = o
		case o.Attrs().MasterIndex != 0 && o.Attrs().MasterIndex == l.Attrs().Index:
			related[o.Attrs().Index] = o
		}
	}
	return related
}

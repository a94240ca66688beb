package netattach

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
)

// ErrPrimaryInterface is wrapped by CheckNotPrimary's refusals.
var ErrPrimaryInterface = errors.New("netdev carries the node's own traffic")

// ErrUpperDevice is wrapped by CheckNoUppers's refusals.
var ErrUpperDevice = errors.New("netdev has upper devices in the host namespace")

// CheckNotPrimary refuses (with an error wrapping ErrPrimaryInterface that names the
// netdev and why) a netdev that carries the host's default route or one of nodeIPs,
// directly, through a bond (the netdev's bond master and, for a bond, its slaves count
// as the same link) or through a device stacked on any of them (a VLAN, macvlan or
// ipvlan sends and receives through its lower). Taking such a netdev away would cut the
// node off or hand its traffic to a pod. Move mode calls it before it takes anything;
// the caller may call it earlier (at prepare) to fail fast.
func CheckNotPrimary(nl Netlink, netdev string, nodeIPs []netip.Addr) error {
	l, err := nl.LinkByName(netdev)
	if err != nil {
		return fmt.Errorf("look up %s: %w", netdev, err)
	}
	links, err := nl.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	start := []netlink.Link{l}
	for _, o := range links {
		if o.Attrs().MasterIndex != 0 && o.Attrs().MasterIndex == l.Attrs().Index {
			start = append(start, o) // a bond's slaves
		}
	}
	related := stacked(start, links)

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

// CheckNoUppers refuses (with an error wrapping ErrUpperDevice that names them) a
// netdev with devices stacked on it in its namespace: a master (bond, bridge, team,
// VRF) or a VLAN, macvlan, ipvlan or tunnel on it, or on those. Moving the netdev would
// leave them in the host on a lower that is now the pod's: a macvlan keeps receiving
// through it, so the pod would see (and could answer) the host's traffic. Move mode
// calls it before it takes anything.
func CheckNoUppers(nl Netlink, netdev string) error {
	l, err := nl.LinkByName(netdev)
	if err != nil {
		return fmt.Errorf("look up %s: %w", netdev, err)
	}
	links, err := nl.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	up := stacked([]netlink.Link{l}, links)
	delete(up, l.Attrs().Index)
	if len(up) == 0 {
		return nil
	}
	var names []string
	for _, idx := range slices.Sorted(maps.Keys(up)) {
		names = append(names, fmt.Sprintf("%s (%s)", up[idx].Attrs().Name, up[idx].Type()))
	}
	return fmt.Errorf("refuse to move %s: %w: %s", netdev, ErrUpperDevice, strings.Join(names, ", "))
}

// peerKinds are the kinds whose IFLA_LINK names their peer, not a device they are
// stacked on.
var peerKinds = map[string]bool{"veth": true, "netkit": true, "vxcan": true}

// stacked is start and every link stacked on it, transitively, by index: a link's
// master, and the links whose IFLA_LINK (ParentIndex) is it, unless that index is one
// of another namespace (IFLA_LINK_NETNSID, NetNsID >= 0) or names a peer.
func stacked(start []netlink.Link, links []netlink.Link) map[int]netlink.Link {
	byIndex := make(map[int]netlink.Link, len(links))
	for _, o := range links {
		byIndex[o.Attrs().Index] = o
	}
	set := map[int]netlink.Link{}
	for queue := start; len(queue) > 0; {
		x := queue[0]
		queue = queue[1:]
		xa := x.Attrs()
		if _, seen := set[xa.Index]; seen {
			continue
		}
		set[xa.Index] = x
		if m, ok := byIndex[xa.MasterIndex]; ok && xa.MasterIndex != 0 {
			queue = append(queue, m)
		}
		for _, o := range links {
			a := o.Attrs()
			if a.ParentIndex == xa.Index && a.Index != xa.Index && a.NetNsID < 0 && !peerKinds[o.Type()] {
				queue = append(queue, o)
			}
		}
	}
	return set
}

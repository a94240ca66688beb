package netattach

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// ErrNodeAddress is wrapped by Attach when the spec's addresses or routes would give the
// pod what belongs to the node: one of its addresses, the gateway of one of its routes,
// a route over one of its addresses or through it.
var ErrNodeAddress = errors.New("reserved for the node")

// checkNodeBoundary refuses, before anything is saved or changed, a spec whose addresses
// or routes reach the node. They come from the claim's config or the node's address
// pools, which the plugin checks at admission and prepare; this is the last line, on
// the node's own view, whatever reached it: an address the host holds (on any link of
// its namespace, or a node IP) would let the pod answer for the node; the gateway of a
// host route would let it answer for the host's router; a route over a node address or
// through the node would send the pod's traffic to the node past the pod network (and
// its policies). In move mode with KeepHostAddress the netdev's own addresses go to the
// pod by the admin's choice and are not the node's to protect.
func (r *run) checkNodeBoundary() error {
	spec := r.st.Spec
	if len(spec.Addresses) == 0 && len(spec.Routes) == 0 {
		return nil
	}
	held, gateways, err := r.nodeAddresses()
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range spec.Addresses {
		if who, ok := held[p.Addr()]; ok {
			errs = append(errs, fmt.Errorf("refuse pod address %s: %w: %s", p, ErrNodeAddress, who))
		} else if rt, ok := gateways[p.Addr()]; ok {
			errs = append(errs, fmt.Errorf("refuse pod address %s: %w: it is the gateway of the host's %s", p, ErrNodeAddress, rt))
		}
	}
	sorted := slices.SortedFunc(maps.Keys(held), netip.Addr.Compare)
	for _, rt := range spec.Routes {
		if i := slices.IndexFunc(sorted, rt.Dst.Contains); i >= 0 {
			errs = append(errs, fmt.Errorf("refuse pod route %s: %w: it contains %s (%s)", rt.Dst, ErrNodeAddress, sorted[i], held[sorted[i]]))
		}
		if who, ok := held[rt.Gateway.WithZone("")]; ok {
			errs = append(errs, fmt.Errorf("refuse pod route %s via %s: %w: its gateway is the node's (%s)", rt.Dst, rt.Gateway, ErrNodeAddress, who))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("attach %s: %w", spec.HostNetdev, err)
	}
	return nil
}

// nodeAddresses returns what the node holds, each with who holds it ("eth0 has it",
// "a node IP"), and the gateways of the host's routes in every table, each with its
// route.
func (r *run) nodeAddresses() (held map[netip.Addr]string, gateways map[netip.Addr]string, err error) {
	own := "" // the moved netdev, whose addresses go to the pod
	if spec := r.st.Spec; spec.Mode == ModeMove && spec.KeepHostAddress {
		own = spec.HostNetdev
	}
	return hostHeld(r.host.Netlink(), r.a.nodeIPs, own)
}

// NodeAddresses returns every address a pod must never get from the attacher: the
// addresses of every link of the host's namespace, the node IPs and the gateways of the
// host's routes in every table, read now. An allocator that skips them never picks an
// address Attach would refuse.
func (a *Attacher) NodeAddresses(ctx context.Context) ([]netip.Addr, error) {
	host, err := a.ns.Host(ctx)
	if err != nil {
		return nil, fmt.Errorf("open host network namespace: %w", err)
	}
	defer closeNS(klog.FromContext(ctx), host)
	held, gateways, err := hostHeld(host.Netlink(), a.nodeIPs, "")
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, 0, len(held)+len(gateways))
	for _, m := range []map[netip.Addr]string{held, gateways} {
		for addr := range m {
			out = append(out, addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out), nil
}

// hostHeld reads what nl's namespace holds (with who holds it) and the gateways of its
// routes (with their route), and adds nodeIPs; the addresses of the link named except
// are left out (a netdev moved with keepHostAddress takes them along).
func hostHeld(nl Netlink, nodeIPs []netip.Addr, except string) (held map[netip.Addr]string, gateways map[netip.Addr]string, err error) {
	links, err := nl.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("list host links: %w", err)
	}
	names := make(map[int]string, len(links))
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	own := 0
	for _, l := range links {
		if except != "" && l.Attrs().Name == except {
			own = l.Attrs().Index
		}
	}
	addrs, err := nl.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, fmt.Errorf("list host addresses: %w", err)
	}
	held = map[netip.Addr]string{}
	for _, a := range addrs {
		if p, ok := fromIPNet(a.IPNet); ok && (own == 0 || a.LinkIndex != own) {
			held[p.Addr()] = names[a.LinkIndex] + " has it"
		}
	}
	for _, ip := range nodeIPs {
		if who, ok := held[ip.Unmap()]; ok {
			held[ip.Unmap()] = who + ", a node IP"
		} else {
			held[ip.Unmap()] = "a node IP"
		}
	}
	routes, err := nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, nil, fmt.Errorf("list host routes: %w", err)
	}
	gateways = map[netip.Addr]string{}
	for _, rt := range routes {
		hops := []netlink.NexthopInfo{{LinkIndex: rt.LinkIndex, Gw: rt.Gw}}
		for _, nh := range rt.MultiPath {
			hops = append(hops, *nh)
		}
		for _, nh := range hops {
			gw := fromIP(nh.Gw)
			if _, seen := gateways[gw]; !gw.IsValid() || seen {
				continue
			}
			gateways[gw] = "route " + dstString(rt.Dst) + " on " + names[nh.LinkIndex]
			if rt.Table != unix.RT_TABLE_MAIN && rt.Table != 0 {
				gateways[gw] += fmt.Sprintf(" (table %d)", rt.Table)
			}
		}
	}
	return held, gateways, nil
}

// dstString is a route destination as ip route shows it, a default route included.
func dstString(dst *net.IPNet) string {
	if p, ok := fromIPNet(dst); ok {
		return p.Masked().String()
	}
	return "default"
}

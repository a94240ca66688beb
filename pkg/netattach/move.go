package netattach

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Route protocols the kernel or routing daemons own: such routes come back by
// themselves when the addresses (or router advertisements) do, so they are not recorded.
const (
	rtprotKernel = unix.RTPROT_KERNEL
	rtprotRA     = unix.RTPROT_RA
)

// ErrBondNotMovable is wrapped by Attach for a move of a bond: the kernel does not let
// bonds change network namespace. A bond's network reaches a pod through a macvlan or
// ipvlan child.
var ErrBondNotMovable = errors.New("bond devices cannot change network namespace (the kernel keeps them in their own); attach a macvlan or ipvlan child instead")

// snapshot records a host netdev before it moves: what Detach restores.
func snapshot(nl Netlink, l netlink.Link) (*HostSnapshot, error) {
	attrs := l.Attrs()
	s := &HostSnapshot{
		Name: attrs.Name, HardwareAddr: attrs.HardwareAddr.String(), Index: attrs.Index, Type: l.Type(),
		MTU: attrs.MTU, Up: attrs.Flags&net.FlagUp != 0,
		ParentDev: attrs.ParentDev, ParentDevBus: attrs.ParentDevBus,
	}
	if slices.ContainsFunc(attrs.PermHWAddr, func(b byte) bool { return b != 0 }) {
		s.PermHardwareAddr = attrs.PermHWAddr.String()
	}
	addrs, err := nl.AddrList(l, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list addresses of %s: %w", attrs.Name, err)
	}
	for _, a := range addrs {
		p, ok := fromIPNet(a.IPNet)
		if !ok || p.Addr().IsLinkLocalUnicast() || p.Addr().IsLoopback() {
			continue // link-local addresses are made by the kernel wherever the link is
		}
		if p.Addr().Is6() && a.Flags&unix.IFA_F_PERMANENT == 0 {
			continue // autoconfigured (SLAAC): router advertisements bring it back
		}
		s.Addresses = append(s.Addresses, p)
	}
	// Every table: RouteList alone sees main only, and a move flushes the netdev's
	// routes from all of them (per-rail policy routing keeps a rail's in its own).
	routes, err := nl.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: attrs.Index, Table: unix.RT_TABLE_UNSPEC},
		netlink.RT_FILTER_OIF|netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, fmt.Errorf("list routes of %s: %w", attrs.Name, err)
	}
	for _, rt := range routes {
		if int(rt.Protocol) == rtprotKernel || int(rt.Protocol) == rtprotRA || len(rt.MultiPath) > 0 {
			continue
		}
		if rt.Type != 0 && rt.Type != unix.RTN_UNICAST {
			continue // local, broadcast ...: the kernel's, and not restorable as a unicast route
		}
		dst, ok := fromIPNet(rt.Dst)
		if !ok || dst.Addr().IsLinkLocalUnicast() || dst.Addr().IsMulticast() {
			continue
		}
		hr := HostRoute{Dst: dst.Masked(), Gateway: fromIP(rt.Gw), Src: fromIP(rt.Src), Priority: rt.Priority, Protocol: int(rt.Protocol)}
		if rt.Table != 0 && rt.Table != unix.RT_TABLE_MAIN {
			hr.Table = rt.Table
		}
		s.Routes = append(s.Routes, hr)
	}
	return s, nil
}

// attachMove moves the host netdev itself into the pod. The netdev is brought down and
// renamed to the temporary name in the host first: renaming needs it down, the move
// brings it down anyway, and the temporary name cannot collide with a name in the pod.
// Moving flushes the host's addresses and routes through it; with KeepHostAddress they
// are added again in the pod.
func (r *run) attachMove() error {
	spec := r.st.Spec
	hnl := r.host.Netlink()
	if err := CheckNotPrimary(hnl, spec.HostNetdev, r.a.nodeIPs); err != nil {
		return err
	}
	l, err := hnl.LinkByName(spec.HostNetdev)
	if err != nil {
		return fmt.Errorf("look up %s: %w", spec.HostNetdev, err)
	}
	if l.Type() == "bond" {
		// The kernel marks bonds netns-local (netns_immutable): a move would fail after
		// the bond was already taken down.
		return fmt.Errorf("move %s: %w", spec.HostNetdev, ErrBondNotMovable)
	}
	if err := CheckNoUppers(hnl, spec.HostNetdev); err != nil {
		return err
	}
	if r.st.Host, err = snapshot(hnl, l); err != nil {
		return err
	}
	if r.st.TempName, err = r.freeTempName(); err != nil {
		return err
	}
	r.st.HardwareAddr = r.st.Host.HardwareAddr
	if err := r.commit(); err != nil {
		return err
	}
	if err := hnl.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %s down: %w", spec.HostNetdev, err)
	}
	if err := hnl.LinkSetName(l, r.st.TempName); err != nil {
		return fmt.Errorf("rename %s to %s: %w", spec.HostNetdev, r.st.TempName, err)
	}
	l.Attrs().Name = r.st.TempName
	if err := hnl.LinkSetNsFd(l, r.pod.FD()); err != nil {
		return fmt.Errorf("move %s into the pod: %w", spec.HostNetdev, err)
	}
	if dev := spec.gidDevice(); dev != "" {
		// The move flushed the host's addresses, and the kernel their GIDs.
		for _, p := range r.st.Host.Addresses {
			if err := r.a.kernel.AddressRemoved(r.ctx, dev, spec.IBPort, r.st.Host.Name, p.Addr()); err != nil {
				return fmt.Errorf("remove GID of host address %s: %w", p.Addr(), err)
			}
		}
	}
	pnl := r.pod.Netlink()
	if l, err = pnl.LinkByName(r.st.TempName); err != nil {
		return fmt.Errorf("look up %s in the pod: %w", r.st.TempName, err)
	}
	// Before the pod can touch it (its containers start after the attach): from here
	// on, its ifindex is what finds it.
	r.st.PodIndex = l.Attrs().Index
	if err := r.commit(); err != nil {
		return err
	}
	if err := pnl.LinkSetName(l, spec.PodIfName); err != nil {
		return fmt.Errorf("rename %s to %s in the pod: %w", r.st.TempName, spec.PodIfName, err)
	}
	l.Attrs().Name = spec.PodIfName
	if spec.MTU != 0 && spec.MTU != l.Attrs().MTU {
		if err := pnl.LinkSetMTU(l, spec.MTU); err != nil {
			return fmt.Errorf("set MTU %d on %s in the pod: %w", spec.MTU, spec.PodIfName, err)
		}
	}
	addrs := append([]netip.Prefix(nil), spec.Addresses...)
	routes := append([]Route(nil), spec.Routes...)
	if spec.KeepHostAddress {
		addrs = append(addrs, r.st.Host.Addresses...)
		for _, hr := range r.st.Host.Routes {
			// The main table's only: the pod has no rules that would select the others,
			// and their routes (a rail's own default route) would land in its main.
			if hr.Table == 0 {
				routes = append(routes, Route{Dst: hr.Dst, Gateway: hr.Gateway})
			}
		}
	}
	return r.configurePod(l, addrs, routes)
}

// detachMove brings the netdev back to the host and restores it as snapshotted. It
// finds it (findMoved) by what the pod cannot change: in the pod, else in the host (the
// kernel returns a physical netdev whose namespace died to the host, renamed to devN if
// its name is taken).
func (r *run) detachMove() error {
	snap := r.st.Host
	if snap == nil {
		return nil // nothing was taken yet
	}
	if r.pod != nil {
		if err := r.returnFromPod(snap); err != nil {
			return err
		}
	}
	l, err := r.waitInHost(snap)
	if err != nil {
		return err
	}
	// Attach never takes such a netdev, so a State that names one is not this package's
	// doing (a damaged or foreign checkpoint): "restoring" it could cut the node off.
	if err := CheckNotPrimary(r.host.Netlink(), l.Attrs().Name, r.a.nodeIPs); errors.Is(err, ErrPrimaryInterface) {
		r.log.Error(err, "Attachment state names a netdev that carries the node's traffic, leaving it as it is")
		return nil
	}
	return r.restoreHost(l, snap)
}

// returnFromPod moves the netdev, if it is in the pod, back to the host under the
// temporary name and with its own MAC, and with nothing of the pod's stacked on it: the
// pod may have named it like a host netdev or given it another's MAC, and neither may
// reach the host.
func (r *run) returnFromPod(snap *HostSnapshot) error {
	pnl := r.pod.Netlink()
	l, err := findMoved(pnl, snap, r.st.PodIndex, 0, r.st.Spec.PodIfName, r.st.TempName, snap.Name)
	if err != nil || l == nil {
		return err
	}
	if err := r.dropPodUppers(l); err != nil {
		return err
	}
	if err := pnl.LinkSetDown(l); err != nil {
		return fmt.Errorf("set %s down in the pod: %w", l.Attrs().Name, err)
	}
	if l.Attrs().Name != r.st.TempName {
		if err := r.claimTempName(l); err != nil {
			return err
		}
		if err := pnl.LinkSetName(l, r.st.TempName); err != nil {
			return fmt.Errorf("rename %s to %s in the pod: %w", l.Attrs().Name, r.st.TempName, err)
		}
		l.Attrs().Name = r.st.TempName
	}
	if err := setMAC(pnl, l, snap.HardwareAddr); err != nil {
		return fmt.Errorf("restore MAC %s of %s in the pod: %w", snap.HardwareAddr, snap.Name, err)
	}
	if err := pnl.LinkSetNsFd(l, r.host.FD()); err != nil {
		return fmt.Errorf("move %s back to the host: %w", snap.Name, err)
	}
	return nil
}

// restoreHost gives the returned netdev its name, MAC, MTU, addresses, up state and routes
// back. Every step is idempotent.
func (r *run) restoreHost(l netlink.Link, snap *HostSnapshot) error {
	nl := r.host.Netlink()
	if l.Attrs().Name != snap.Name || !sameMAC(l.Attrs().HardwareAddr, snap.HardwareAddr) {
		// Renaming and a new MAC need the link down. A netdev the kernel returned from a
		// dead namespace has the name and MAC the pod gave it.
		if l.Attrs().Flags&net.FlagUp != 0 {
			if err := nl.LinkSetDown(l); err != nil {
				return fmt.Errorf("set %s down: %w", l.Attrs().Name, err)
			}
		}
		if err := setMAC(nl, l, snap.HardwareAddr); err != nil {
			return fmt.Errorf("restore MAC %s of %s: %w", snap.HardwareAddr, l.Attrs().Name, err)
		}
	}
	if l.Attrs().Name != snap.Name {
		if err := nl.LinkSetName(l, snap.Name); err != nil {
			return fmt.Errorf("rename %s back to %s: %w", l.Attrs().Name, snap.Name, err)
		}
		l.Attrs().Name = snap.Name
	}
	if l.Attrs().MTU != snap.MTU {
		if err := nl.LinkSetMTU(l, snap.MTU); err != nil {
			return fmt.Errorf("restore MTU %d of %s: %w", snap.MTU, snap.Name, err)
		}
	}
	for _, p := range snap.Addresses {
		if err := addAddr(nl, l, p); err != nil {
			return fmt.Errorf("restore address %s of %s: %w", p, snap.Name, err)
		}
	}
	if !snap.Up {
		// A link that is down has no routes through it.
		if err := nl.LinkSetDown(l); err != nil {
			return fmt.Errorf("set %s down: %w", snap.Name, err)
		}
	} else {
		if err := nl.LinkSetUp(l); err != nil {
			return fmt.Errorf("set %s up: %w", snap.Name, err)
		}
		for _, hr := range snap.Routes {
			if err := nl.RouteAdd(hostRoute(l, hr)); err != nil && !isExist(err) {
				return fmt.Errorf("restore route %s of %s: %w", hr.Dst, snap.Name, err)
			}
		}
	}
	if dev := r.st.Spec.gidDevice(); dev != "" {
		for _, p := range snap.Addresses {
			if err := r.a.kernel.AddressAdded(r.ctx, dev, r.st.Spec.IBPort, snap.Name, p.Addr()); err != nil {
				return fmt.Errorf("restore GID of %s: %w", p.Addr(), err)
			}
		}
	}
	r.log.V(2).Info("Restored host netdev", "netdev", snap.Name, "addresses", snap.Addresses, "routes", len(snap.Routes))
	return nil
}

func hostRoute(l netlink.Link, hr HostRoute) *netlink.Route {
	nr := podRoute(l, Route{Dst: hr.Dst, Gateway: hr.Gateway})
	if hr.Src.IsValid() {
		nr.Src = net.IP(hr.Src.AsSlice())
	}
	nr.Priority = hr.Priority
	nr.Table = hr.Table
	nr.Protocol = netlink.RouteProtocol(hr.Protocol)
	return nr
}

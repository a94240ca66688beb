package netattach

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
)

// How Detach finds a netdev that moved into a pod. The pod may hold NET_ADMIN in its
// namespace: it can rename the netdev, change its MAC, MTU and up state, and create
// links of its own under any free name (the temporary one too) and with any free
// ifindex. It cannot change the netdev's ifindex while the netdev stays in its
// namespace, nor what the driver gave it: its permanent (burnt-in) address and its
// parent device. Neither can the pod reach the host's namespace. So:
//
//   - in the pod, the netdev is the link at State.PodIndex (of the snapshot's kind and,
//     where recorded, permanent address and parent device);
//   - in the host (after the pod's namespace died, or after a crash once it moved
//     back), it is the link at the snapshot's ifindex, which the kernel keeps when it
//     returns a netdev and does not give to another link until its counter wraps, else
//     the one link with the snapshot's permanent address and parent device;
//   - where none of that is recorded (a State written before PodIndex was, a crash
//     before it was saved, before the pod ran), it is the link with the recorded MAC, as
//     before.

// findMoved returns the moved netdev in nl, or nil when it is not there. podIndex is
// State.PodIndex when nl is the pod's (0 when not recorded), hostIndex the snapshot's
// ifindex when nl is the host's; names are looked at first in the MAC fallback.
func findMoved(nl Netlink, snap *HostSnapshot, podIndex, hostIndex int, names ...string) (netlink.Link, error) {
	if podIndex != 0 {
		// The pod cannot move the netdev off this index, so if the netdev is not here
		// it is not in the pod.
		return linkAt(nl, podIndex, snap)
	}
	if hostIndex != 0 {
		if l, err := linkAt(nl, hostIndex, snap); err != nil || l != nil {
			return l, err
		}
	}
	links, err := nl.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	if snap.hasIdentity() {
		return snap.pick(links)
	}
	match := func(l netlink.Link) bool {
		return snap.sameDevice(l) && sameMAC(l.Attrs().HardwareAddr, snap.HardwareAddr)
	}
	for _, name := range names {
		if name == "" {
			continue
		}
		l, err := lookupLink(nl, name)
		if err != nil {
			return nil, err
		}
		if l != nil && match(l) {
			return l, nil
		}
	}
	for _, l := range links {
		if match(l) {
			return l, nil
		}
	}
	return nil, nil
}

// linkAt returns the link at index if it is the snapshot's netdev, else nil.
func linkAt(nl Netlink, index int, snap *HostSnapshot) (netlink.Link, error) {
	l, err := nl.LinkByIndex(index)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up link %d: %w", index, err)
	}
	if !snap.sameDevice(l) {
		return nil, nil
	}
	return l, nil
}

// hasIdentity reports whether the snapshot records something that identifies the
// netdev in any namespace and that nobody can change.
func (s *HostSnapshot) hasIdentity() bool { return s.PermHardwareAddr != "" || s.ParentDev != "" }

// sameDevice reports whether l may be the snapshot's netdev: of its kind and with its
// permanent address and parent device, where recorded.
func (s *HostSnapshot) sameDevice(l netlink.Link) bool {
	a := l.Attrs()
	return l.Type() == s.Type &&
		(s.PermHardwareAddr == "" || a.PermHWAddr.String() == s.PermHardwareAddr) &&
		(s.ParentDev == "" || a.ParentDev == s.ParentDev && a.ParentDevBus == s.ParentDevBus)
}

// pick returns the one link of links that is the snapshot's netdev, or nil. A parent
// device without a permanent address may be shared (two ports of one PCI function):
// then the recorded MAC decides, and without it the netdev is not guessed.
func (s *HostSnapshot) pick(links []netlink.Link) (netlink.Link, error) {
	var found []netlink.Link
	for _, l := range links {
		if s.sameDevice(l) {
			found = append(found, l)
		}
	}
	if len(found) > 1 {
		var same []netlink.Link
		for _, l := range found {
			if sameMAC(l.Attrs().HardwareAddr, s.HardwareAddr) {
				same = append(same, l)
			}
		}
		if len(same) != 1 {
			return nil, fmt.Errorf("find %s: %d links have its parent device %s and none or several its MAC %s", s.Name, len(found), s.ParentDev, s.HardwareAddr)
		}
		found = same
	}
	if len(found) == 0 {
		return nil, nil
	}
	return found[0], nil
}

// waitInHost finds the moved netdev in the host. When the pod's namespace is gone the
// kernel returns it asynchronously, so it waits up to the return timeout.
func (r *run) waitInHost(snap *HostSnapshot) (netlink.Link, error) {
	start := r.a.clock.Now()
	for {
		l, err := findMoved(r.host.Netlink(), snap, 0, snap.Index, snap.Name, r.st.TempName, r.st.Spec.PodIfName)
		if err != nil || l != nil {
			return l, err
		}
		if r.pod != nil || r.a.clock.Since(start) >= r.a.returnTimeout {
			return nil, fmt.Errorf("netdev %s (%s) is neither in the pod nor back in the host", snap.Name, snap.HardwareAddr)
		}
		select {
		case <-r.ctx.Done():
			return nil, fmt.Errorf("wait for %s to return to the host: %w", snap.Name, context.Cause(r.ctx))
		case <-r.a.clock.After(50 * time.Millisecond):
		}
	}
}

// claimTempName makes sure the State's temporary name is free for l in both namespaces
// before l is renamed to it in the pod. The pod can compute the name (a hash of what it
// knows) and give it to a link of its own; then a random one takes its place, saved
// before it is used.
func (r *run) claimTempName(l netlink.Link) error {
	for attempt := 0; ; attempt++ {
		free := true
		for _, ns := range []Namespace{r.pod, r.host} {
			o, err := lookupLink(ns.Netlink(), r.st.TempName)
			if err != nil {
				return err
			}
			free = free && (o == nil || o.Attrs().Index == l.Attrs().Index && ns == r.pod)
		}
		if free {
			return nil
		}
		if attempt == 16 {
			return fmt.Errorf("find a free temporary name for %s in the pod", l.Attrs().Name)
		}
		b := make([]byte, 4)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		name := r.a.tempPrefix + hex.EncodeToString(b)
		r.log.V(2).Info("Temporary name taken, taking another", "taken", r.st.TempName, "name", name)
		r.st.TempName = name[:min(len(name), maxIfNameLen)]
		if err := r.commit(); err != nil {
			return err
		}
	}
}

// dropPodUppers deletes what the pod stacked on the netdev in its namespace (a macvlan,
// VLAN or ipvlan, a master of its own). The kernel leaves such devices where they are
// when their lower changes namespace: in the pod they would go on receiving the host's
// traffic on the netdev (all of it, through a passthru macvlan) and sending as the
// host. They are the pod's, and the pod is going.
func (r *run) dropPodUppers(l netlink.Link) error {
	nl := r.pod.Netlink()
	links, err := nl.LinkList()
	if err != nil {
		return fmt.Errorf("list links in the pod: %w", err)
	}
	up := stacked([]netlink.Link{l}, links)
	delete(up, l.Attrs().Index)
	// The newest first: deleting a lower takes its own uppers with it.
	for _, idx := range slices.Backward(slices.Sorted(maps.Keys(up))) {
		if err := nl.LinkDel(up[idx]); err != nil && !isNotFound(err) {
			return fmt.Errorf("delete %s, stacked on %s in the pod: %w", up[idx].Attrs().Name, l.Attrs().Name, err)
		}
		r.log.V(2).Info("Deleted a device the pod stacked on the moved netdev", "link", up[idx].Attrs().Name, "type", up[idx].Type())
	}
	return nil
}

// setMAC gives l the recorded MAC if it has another one. l must be down.
func setMAC(nl Netlink, l netlink.Link, recorded string) error {
	if recorded == "" || sameMAC(l.Attrs().HardwareAddr, recorded) {
		return nil
	}
	hw, err := net.ParseMAC(recorded)
	if err != nil {
		return fmt.Errorf("parse %q: %w", recorded, err)
	}
	if err := nl.LinkSetHardwareAddr(l, hw); err != nil {
		return err
	}
	l.Attrs().HardwareAddr = hw
	return nil
}

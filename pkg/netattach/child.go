package netattach

import (
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
)

// childLink builds the link Attach creates for a child mode: in the host namespace
// under name, on parent.
func childLink(spec Spec, parent netlink.Link, name string) netlink.Link {
	attrs := netlink.LinkAttrs{Name: name, ParentIndex: parent.Attrs().Index, MTU: spec.MTU}
	switch spec.Mode {
	case ModeIPVlan:
		return &netlink.IPVlan{LinkAttrs: attrs, Mode: netlink.IPVLAN_MODE_L2}
	case ModeIPoIB:
		return &netlink.IPoIB{LinkAttrs: attrs, Pkey: spec.PKey, Mode: netlink.IPOIB_MODE_DATAGRAM}
	default:
		return &netlink.Macvlan{LinkAttrs: attrs, Mode: netlink.MACVLAN_MODE_BRIDGE}
	}
}

// childType is the kernel's kind of the child a mode creates.
func childType(m Mode) string {
	switch m {
	case ModeIPVlan:
		return "ipvlan"
	case ModeIPoIB:
		return "ipoib"
	default:
		return "macvlan"
	}
}

// attachChild creates the child under a temporary name in the host namespace (where
// its parent is), moves it into the pod, renames it and configures it. Creating it in
// the host and moving it is what lets a pod's child exist at all (its parent stays in
// the host); the temporary name keeps two pods' "net1" from colliding there.
func (r *run) attachChild() error {
	spec := r.st.Spec
	hnl := r.host.Netlink()
	parent, err := hnl.LinkByName(spec.HostNetdev)
	if err != nil {
		return fmt.Errorf("look up parent %s: %w", spec.HostNetdev, err)
	}
	if r.st.TempName, err = r.freeTempName(); err != nil {
		return err
	}
	if err := r.commit(); err != nil {
		return err
	}
	if err := hnl.LinkAdd(childLink(spec, parent, r.st.TempName)); err != nil {
		return fmt.Errorf("create %s child %s of %s: %w", childType(spec.Mode), r.st.TempName, spec.HostNetdev, err)
	}
	child, err := hnl.LinkByName(r.st.TempName)
	if err != nil {
		return fmt.Errorf("look up new child %s: %w", r.st.TempName, err)
	}
	r.st.HardwareAddr = child.Attrs().HardwareAddr.String()
	if err := r.commit(); err != nil {
		return err
	}
	if err := hnl.LinkSetNsFd(child, r.pod.FD()); err != nil {
		return fmt.Errorf("move child %s into the pod: %w", r.st.TempName, err)
	}
	pnl := r.pod.Netlink()
	child, err = pnl.LinkByName(r.st.TempName)
	if err != nil {
		return fmt.Errorf("look up child %s in the pod: %w", r.st.TempName, err)
	}
	if err := pnl.LinkSetName(child, spec.PodIfName); err != nil {
		return fmt.Errorf("rename child %s to %s in the pod: %w", r.st.TempName, spec.PodIfName, err)
	}
	child.Attrs().Name = spec.PodIfName
	return r.configurePod(child, spec.Addresses, spec.Routes)
}

// detachChild deletes the child wherever the State says it may be: in the pod under its
// final or temporary name, or still in the host under its temporary name. A child
// whose pod namespace is gone died with it.
func (r *run) detachChild() error {
	if r.pod != nil {
		for _, name := range []string{r.st.Spec.PodIfName, r.st.TempName} {
			if err := r.deleteOurChild(r.pod.Netlink(), name, "pod"); err != nil {
				return err
			}
		}
	}
	return r.deleteOurChild(r.host.Netlink(), r.st.TempName, "host")
}

// deleteOurChild deletes the link called name in nl if it is this attachment's child:
// of the mode's kind, and with the recorded hardware address (the temporary name alone
// suffices in the host, where it is unique to this attachment; in the pod the child can
// only be if its address was recorded before it moved).
func (r *run) deleteOurChild(nl Netlink, name, where string) error {
	if name == "" {
		return nil
	}
	l, err := lookupLink(nl, name)
	if err != nil || l == nil {
		return err
	}
	if l.Type() != childType(r.st.Spec.Mode) {
		r.log.V(2).Info("Link is not this attachment's child, leaving it", "link", name, "where", where, "type", l.Type())
		return nil
	}
	mac := l.Attrs().HardwareAddr.String()
	if r.st.HardwareAddr != "" && mac != r.st.HardwareAddr || r.st.HardwareAddr == "" && (where == "pod" || name != r.st.TempName) {
		r.log.V(2).Info("Link is not this attachment's child, leaving it", "link", name, "where", where, "hardwareAddr", mac)
		return nil
	}
	if err := nl.LinkDel(l); err != nil && !isNotFound(err) {
		return fmt.Errorf("delete child %s in the %s: %w", name, where, err)
	}
	r.log.V(4).Info("Deleted child", "link", name, "where", where)
	return nil
}

// sameMAC compares a link's hardware address with a recorded one.
func sameMAC(hw net.HardwareAddr, recorded string) bool {
	return recorded != "" && hw.String() == recorded
}

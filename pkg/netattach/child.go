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

// childSpec is the spec of the child to create: an IPoIB child becomes a macvlan
// where the Attacher stands in for a kernel without ib_ipoib (Options.IPoIBStandIn).
func (r *run) childSpec() Spec {
	spec := r.st.Spec
	if spec.Mode == ModeIPoIB && r.a.ipoibStandIn {
		spec.Mode = ModeMacvlan
	}
	return spec
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

// attachChild creates the child on its parent in the host namespace and, in the same
// netlink request (IFLA_NET_NS_FD), places it in the pod's namespace under a temporary
// name; then renames it and configures it. One request instead of a create and a move
// saves a namespace change (a synchronize_net in the kernel, about 15 ms on a loaded
// node) and leaves no moment where the child is in the host. The temporary name is
// unique to this attachment, so Detach can tell the child from anything else there.
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
	child := childLink(r.childSpec(), parent, r.st.TempName)
	child.Attrs().Namespace = netlink.NsFd(r.pod.FD())
	if err := hnl.LinkAdd(child); err != nil {
		return fmt.Errorf("create %s child %s of %s in the pod: %w", childType(r.childSpec().Mode), r.st.TempName, spec.HostNetdev, err)
	}
	pnl := r.pod.Netlink()
	if child, err = pnl.LinkByName(r.st.TempName); err != nil {
		return fmt.Errorf("look up new child %s in the pod: %w", r.st.TempName, err)
	}
	r.st.HardwareAddr = child.Attrs().HardwareAddr.String()
	if err := r.commit(); err != nil {
		return err
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
// of the mode's kind and, under the pod name, with the recorded hardware address (the
// temporary name alone identifies it: it is unique to this attachment, and the address
// is recorded only after the child exists).
func (r *run) deleteOurChild(nl Netlink, name, where string) error {
	if name == "" {
		return nil
	}
	l, err := lookupLink(nl, name)
	if err != nil || l == nil {
		return err
	}
	mac := l.Attrs().HardwareAddr
	if l.Type() != childType(r.childSpec().Mode) || name != r.st.TempName && !sameMAC(mac, r.st.HardwareAddr) {
		r.log.V(2).Info("Link is not this attachment's child, leaving it", "link", name, "where", where, "type", l.Type(), "hardwareAddr", mac.String())
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

package netattach

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"syscall"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// isNotFound reports whether err says a link does not exist.
func isNotFound(err error) bool {
	var lnf netlink.LinkNotFoundError
	return errors.As(err, &lnf) || errors.Is(err, syscall.ENODEV) || errors.Is(err, syscall.ENOENT)
}

// isExist reports whether err says the address or route is there already.
func isExist(err error) bool { return errors.Is(err, syscall.EEXIST) }

// lookupLink returns the link called name, or nil when there is none.
func lookupLink(nl Netlink, name string) (netlink.Link, error) {
	l, err := nl.LinkByName(name)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up link %s: %w", name, err)
	}
	return l, nil
}

// tempName is the temporary host-side name of an attachment: prefix plus a short hash
// of what identifies it, and attempt to step past a name someone else holds.
func tempName(prefix string, st State, attempt int) string {
	h := sha256.Sum256([]byte(st.Target.PodUID + "\x00" + st.Spec.PodIfName + "\x00" + st.Spec.HostNetdev + "\x00" + strconv.Itoa(attempt)))
	n := maxIfNameLen - len(prefix)
	if n > 8 {
		n = 8
	}
	return prefix + hex.EncodeToString(h[:])[:n]
}

// freeTempName returns a temporary name that no link has in either namespace.
func (r *run) freeTempName() (string, error) {
	for attempt := range 16 {
		name := tempName(r.a.tempPrefix, r.st, attempt)
		taken := false
		for _, ns := range []Namespace{r.host, r.pod} {
			l, err := lookupLink(ns.Netlink(), name)
			if err != nil {
				return "", err
			}
			taken = taken || l != nil
		}
		if !taken {
			return name, nil
		}
		r.log.V(2).Info("Temporary interface name taken, trying the next", "name", name)
	}
	return "", errors.New("no free temporary interface name")
}

// toIPNet converts a prefix to the netlink form, keeping the address (not the masked
// network).
func toIPNet(p netip.Prefix) *net.IPNet {
	bits := 128
	if p.Addr().Is4() {
		bits = 32
	}
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), bits)}
}

// fromIPNet converts a netlink address or destination to a prefix; ok is false for nil
// or malformed values.
func fromIPNet(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 || (a.Is4() && bits != 32 && bits != 128) {
		return netip.Prefix{}, false
	}
	if a.Is4() && bits == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones), true
}

func fromIP(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

// addAddr adds p to link; an address that is there already counts as added. IPv6
// addresses skip duplicate address detection: they are assigned, not autoconfigured,
// and a tentative address cannot be used (nor its GID) for a second or more.
func addAddr(nl Netlink, link netlink.Link, p netip.Prefix) error {
	a := &netlink.Addr{IPNet: toIPNet(p)}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD
	}
	if err := nl.AddrAdd(link, a); err != nil && !isExist(err) {
		return err
	}
	return nil
}

// podRoute is the netlink form of a pod route through link: via the gateway, or on the
// link when there is none.
func podRoute(link netlink.Link, r Route) *netlink.Route {
	nr := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: toIPNet(r.Dst.Masked())}
	if r.Gateway.IsValid() {
		nr.Gw = net.IP(r.Gateway.AsSlice())
	} else if r.Dst.Addr().Is4() {
		nr.Scope = netlink.SCOPE_LINK
	}
	return nr
}

// isDefault reports whether a route destination is a default route.
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}

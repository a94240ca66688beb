package v1alpha1

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NetworkConfig attaches the network of an allocated port into the pod's own network
// namespace when the pod sandbox is created (docs/network-attachment.md): a macvlan or
// ipvlan child of a RoCE port's netdev for shares, the netdev itself moved for a whole
// port, or an IPoIB child for InfiniBand. Without it (mode none, the default) the pod
// gets the char devices and environment only, as before.
//
// Like RdmaConfig, every field is optional and a claim's value overrides its class's
// field by field; list fields are replaced whole.
type NetworkConfig struct {
	// Mode is how the port's network reaches the pod: none (default), macvlan, ipvlan,
	// move or ipoib.
	Mode *NetworkMode `json:"mode,omitempty"`
	// InterfaceName is the interface's name inside the pod. Default: rdma0, rdma1, ... in
	// the order of the pod's claims and their devices; an installation of the driver
	// under another driver name uses a prefix of its own, derived from that name
	// (docs/network-attachment.md), so that two installations never pick the same name.
	InterfaceName *string `json:"interfaceName,omitempty"`
	// MTU of the pod's interface; default the port netdev's MTU.
	MTU *int32 `json:"mtu,omitempty"`
	// Addresses are static addresses with prefix length for the pod's interface, e.g.
	// 192.168.77.11/24 or fd00:77::11/64. They apply to exactly one device: a request
	// of several devices uses ipam instead.
	Addresses []string `json:"addresses,omitempty"`
	// IPAM is where addresses come from when Addresses is empty: none (default) or node,
	// the address pools of the node configuration (per node, persisted, never one
	// address to two pods).
	IPAM *IPAMMode `json:"ipam,omitempty"`
	// Routes are added in the pod through its interface.
	Routes []RouteConfig `json:"routes,omitempty"`
	// KeepHostAddress (move mode) moves the host's addresses and routes of the netdev
	// into the pod with it; they come back to the host at teardown. It hands the pod an
	// address of the node, so it is the admin's alone: only a DeviceClass config may set
	// it. Default false.
	KeepHostAddress *bool `json:"keepHostAddress,omitempty"`
	// SocketInterface sets NCCL_SOCKET_IFNAME to the pod's interface, so that NCCL's
	// bootstrap also uses it. Default false.
	SocketInterface *bool `json:"socketInterface,omitempty"`
	// PKey is the P_Key of an IPoIB child, 0x0001 to 0xffff; default 0xffff (the full
	// default partition).
	PKey *string `json:"pkey,omitempty"`
}

// RouteConfig is one route in the pod.
type RouteConfig struct {
	// Destination is a prefix such as 192.168.0.0/16, or default.
	Destination string `json:"destination"`
	// Gateway is the next hop; empty for a directly connected destination.
	Gateway string `json:"gateway,omitempty"`
}

// NetworkMode is how a port's network is attached to a pod.
type NetworkMode string

// The network modes.
const (
	// NetworkModeNone attaches nothing (the default).
	NetworkModeNone NetworkMode = "none"
	// NetworkModeMacvlan creates a macvlan child (bridge mode) of the port's netdev in
	// the pod: for shares of a RoCE port.
	NetworkModeMacvlan NetworkMode = "macvlan"
	// NetworkModeIPVlan creates an ipvlan child (L2 mode) of the port's netdev: for
	// shares of a RoCE port where MAC addresses are limited.
	NetworkModeIPVlan NetworkMode = "ipvlan"
	// NetworkModeMove moves the port's netdev (or its bond) into the pod and back at
	// teardown: for exclusive claims.
	NetworkModeMove NetworkMode = "move"
	// NetworkModeIPoIB creates an IPoIB child of an InfiniBand port's interface.
	NetworkModeIPoIB NetworkMode = "ipoib"
)

// networkModes lists the modes in the order a user reads them in errors.
var networkModes = []NetworkMode{NetworkModeNone, NetworkModeMacvlan, NetworkModeIPVlan, NetworkModeMove, NetworkModeIPoIB}

// Attaches reports whether the mode attaches anything.
func (m NetworkMode) Attaches() bool { return m != "" && m != NetworkModeNone }

// IPAMMode is where pod addresses come from.
type IPAMMode string

// The IPAM modes.
const (
	// IPAMNone assigns only the static Addresses.
	IPAMNone IPAMMode = "none"
	// IPAMNode assigns one address per interface from the node configuration's address
	// pool that matches the port.
	IPAMNode IPAMMode = "node"
)

var ipamModes = []IPAMMode{IPAMNone, IPAMNode}

// Bounds of the network fields, checked before anything is parsed.
const (
	// MaxNetworkAddresses bounds NetworkConfig.Addresses.
	MaxNetworkAddresses = 8
	// MaxNetworkRoutes bounds NetworkConfig.Routes.
	MaxNetworkRoutes = 16
	// maxAddressLen bounds the text of one address or route field (an IPv6 prefix with
	// a zone is well below it).
	maxAddressLen = 64
	// MinMTU and MaxMTU bound NetworkConfig.MTU: the IPv4 minimum and the largest
	// jumbo frame netdevs accept.
	MinMTU = 68
	MaxMTU = 65535
)

// setDefaults fills the network fields that are still nil.
func (n *NetworkConfig) setDefaults() {
	if n.Mode == nil {
		v := NetworkModeNone
		n.Mode = &v
	}
	if n.IPAM == nil {
		v := IPAMNone
		n.IPAM = &v
	}
	if n.KeepHostAddress == nil {
		v := false
		n.KeepHostAddress = &v
	}
	if n.SocketInterface == nil {
		v := false
		n.SocketInterface = &v
	}
}

// validate checks the set fields, in the order of the type.
func (n *NetworkConfig) validate(fldPath *field.Path) field.ErrorList {
	var errs field.ErrorList
	if n.Mode != nil && !isOneOf(*n.Mode, networkModes) {
		errs = append(errs, field.NotSupported(fldPath.Child("mode"), string(*n.Mode), networkModes))
	}
	if n.InterfaceName != nil {
		if msg := InterfaceNameError(*n.InterfaceName); msg != "" {
			errs = append(errs, field.Invalid(fldPath.Child("interfaceName"), *n.InterfaceName, msg))
		}
	}
	if n.MTU != nil && (*n.MTU < MinMTU || *n.MTU > MaxMTU) {
		errs = append(errs, field.Invalid(fldPath.Child("mtu"), *n.MTU, fmt.Sprintf("must be from %d to %d", MinMTU, MaxMTU)))
	}
	if len(n.Addresses) > MaxNetworkAddresses {
		errs = append(errs, field.TooMany(fldPath.Child("addresses"), len(n.Addresses), MaxNetworkAddresses))
	} else {
		seen := map[netip.Addr]bool{}
		for i, a := range n.Addresses {
			p, err := ParseInterfaceAddress(a)
			if err != nil {
				errs = append(errs, field.Invalid(fldPath.Child("addresses").Index(i), truncate(a), err.Error()))
				continue
			}
			if seen[p.Addr()] {
				errs = append(errs, field.Duplicate(fldPath.Child("addresses").Index(i), a))
			}
			seen[p.Addr()] = true
		}
	}
	if n.IPAM != nil && !isOneOf(*n.IPAM, ipamModes) {
		errs = append(errs, field.NotSupported(fldPath.Child("ipam"), string(*n.IPAM), ipamModes))
	}
	if len(n.Routes) > MaxNetworkRoutes {
		errs = append(errs, field.TooMany(fldPath.Child("routes"), len(n.Routes), MaxNetworkRoutes))
	} else {
		for i, r := range n.Routes {
			p := fldPath.Child("routes").Index(i)
			dst, err := ParseRouteDestination(r.Destination)
			if err != nil {
				errs = append(errs, field.Invalid(p.Child("destination"), truncate(r.Destination), err.Error()))
			}
			if r.Gateway != "" {
				gw, err := parseAddr(r.Gateway)
				switch {
				case err != nil:
					errs = append(errs, field.Invalid(p.Child("gateway"), truncate(r.Gateway), err.Error()))
				case dst.IsValid() && gw.Is4() != dst.Addr().Is4():
					errs = append(errs, field.Invalid(p.Child("gateway"), r.Gateway, "must be of the destination's address family"))
				}
			}
		}
	}
	if n.PKey != nil {
		if _, err := ParsePKey(*n.PKey); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pkey"), truncate(*n.PKey), err.Error()))
		}
	}
	return errs
}

// overlayNetwork sets every field that is set in c on out, as copies.
func overlayNetwork(c, out *NetworkConfig) {
	copyPtr(&out.Mode, c.Mode)
	copyPtr(&out.InterfaceName, c.InterfaceName)
	copyPtr(&out.MTU, c.MTU)
	if c.Addresses != nil {
		out.Addresses = append([]string{}, c.Addresses...)
	}
	copyPtr(&out.IPAM, c.IPAM)
	if c.Routes != nil {
		out.Routes = append([]RouteConfig{}, c.Routes...)
	}
	copyPtr(&out.KeepHostAddress, c.KeepHostAddress)
	copyPtr(&out.SocketInterface, c.SocketInterface)
	copyPtr(&out.PKey, c.PKey)
}

// InterfaceNameError returns why name cannot be a Linux interface name, or "".
func InterfaceNameError(name string) string {
	switch {
	case name == "":
		return "must not be empty"
	case len(name) > 15:
		return "must be at most 15 characters (the kernel's IFNAMSIZ)"
	case name == "." || name == "..":
		return "must not be . or .."
	case name == "lo":
		return "must not be lo, the pod's loopback interface"
	case strings.ContainsAny(name, "/: \t\n%"):
		return "must not contain /, :, % or white space"
	}
	for _, r := range name {
		if r < 0x21 || r > 0x7e {
			return "must be printable ASCII"
		}
	}
	return ""
}

// ParseInterfaceAddress parses an address with prefix length, e.g. 192.168.77.11/24.
// The address must be a unicast host address, not the network itself.
func ParseInterfaceAddress(s string) (netip.Prefix, error) {
	if len(s) > maxAddressLen {
		return netip.Prefix{}, fmt.Errorf("must be at most %d characters", maxAddressLen)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("must be an address with prefix length, such as 192.168.77.11/24 or fd00::11/64")
	}
	a := p.Addr()
	if a.Zone() != "" || !a.IsGlobalUnicast() {
		return netip.Prefix{}, fmt.Errorf("must be a unicast address (not loopback, link-local, multicast or unspecified)")
	}
	if a.Is4() && p.Bits() < 31 && (a == p.Masked().Addr() || isBroadcast(p)) {
		return netip.Prefix{}, fmt.Errorf("is the network or broadcast address of %s", p.Masked())
	}
	return p, nil
}

// ParseRouteDestination parses a route destination: a prefix, or "default" for 0.0.0.0/0.
func ParseRouteDestination(s string) (netip.Prefix, error) {
	if s == "default" {
		return netip.PrefixFrom(netip.IPv4Unspecified(), 0), nil
	}
	if len(s) > maxAddressLen {
		return netip.Prefix{}, fmt.Errorf("must be at most %d characters", maxAddressLen)
	}
	p, err := netip.ParsePrefix(s)
	if err != nil || p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("must be a prefix such as 192.168.0.0/16, or default")
	}
	if p != p.Masked() {
		return netip.Prefix{}, fmt.Errorf("has host bits set: did you mean %s?", p.Masked())
	}
	return p, nil
}

// ParsePKey parses an InfiniBand partition key written as 0x followed by up to four hex
// digits. The full-membership bit is kept as written.
func ParsePKey(s string) (uint16, error) {
	if len(s) < 3 || len(s) > 6 || !strings.HasPrefix(s, "0x") {
		return 0, fmt.Errorf("must be 0x followed by one to four hex digits, such as 0x8001")
	}
	v, err := strconv.ParseUint(s[2:], 16, 16)
	if err != nil || v&0x7fff == 0 {
		return 0, fmt.Errorf("must be a partition key from 0x0001 to 0xffff other than 0x8000")
	}
	return uint16(v), nil
}

func parseAddr(s string) (netip.Addr, error) {
	if len(s) > maxAddressLen {
		return netip.Addr{}, fmt.Errorf("must be at most %d characters", maxAddressLen)
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("must be an IPv4 or IPv6 address")
	}
	return a, nil
}

func isBroadcast(p netip.Prefix) bool {
	a := p.Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(a[0])<<24 | uint32(a[1])<<16 | uint32(a[2])<<8 | uint32(a[3])
	return v&host == host
}

// truncate shortens a bad value before it is quoted back in an error.
func truncate(s string) string {
	if len(s) > maxAddressLen {
		return s[:maxAddressLen] + "..."
	}
	return s
}

func isOneOf[T comparable](v T, set []T) bool {
	for _, s := range set {
		if v == s {
			return true
		}
	}
	return false
}

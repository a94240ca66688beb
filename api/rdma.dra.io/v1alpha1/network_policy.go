package v1alpha1

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// NetworkPolicy is an admin limit (RdmaConfig.AllowedNetwork): what the network section
// of a claim of the class may ask for. Only a DeviceClass config (an RdmaPool's config
// among them) may set it. A claim's config can only narrow it: every network field a
// claim sets is checked against it, while the class's own network section is the
// admin's and is taken as written.
//
// Everything that reaches beyond the pod is off unless a field here grants it: a class
// without network section and without AllowedNetwork lets a claim attach nothing.
type NetworkPolicy struct {
	// Modes a claim may ask for, besides none (always allowed) and the class's own
	// network.mode. Default: none but those two.
	Modes []NetworkMode `json:"modes,omitempty"`
	// AddressPools names the node configuration's address pools (network.addressPools
	// of the node config) that ipam: node may take pod addresses from for this class, the
	// class's own ipam: node included. Default: none, so ipam: node is refused.
	AddressPools []string `json:"addressPools,omitempty"`
	// StaticAddressPrefixes allow claims to set network.addresses: each address, with its
	// whole prefix, must lie inside one of these prefixes, and is never the network or
	// broadcast address of one. The node's own addresses, the port's host addresses,
	// gateways and addresses another pod holds are refused on top of this, whatever the
	// prefixes say. Default: none, so claims may not set static addresses.
	StaticAddressPrefixes []string `json:"staticAddressPrefixes,omitempty"`
	// RoutePrefixes allow claims to set network.routes: each destination must lie inside
	// one of these prefixes, and a gateway inside one of these or of
	// StaticAddressPrefixes. Default: none, so claims may not set routes.
	RoutePrefixes []string `json:"routePrefixes,omitempty"`
	// InterfaceNamePrefixes allow claims to set network.interfaceName: it must start with
	// one of these. Default: none, so the pod's interface takes the driver's name.
	InterfaceNamePrefixes []string `json:"interfaceNamePrefixes,omitempty"`
	// MaxMTU allows claims to set network.mtu, from MinMTU up to this value. Default:
	// unset, so claims may not set an MTU (the port's MTU applies).
	MaxMTU *int32 `json:"maxMTU,omitempty"`
	// PKeys lists the InfiniBand partition keys (0x8001, ...) a claim may ask for in
	// network.pkey. Default: none, so claims get the class's P_Key or the default
	// partition 0xffff.
	PKeys []string `json:"pkeys,omitempty"`
}

// Bounds of a NetworkPolicy's lists, checked before anything is parsed.
const (
	// MaxPolicyEntries bounds each list of a NetworkPolicy and of a FabricPolicy.
	MaxPolicyEntries = 32
	// maxPoolNameLen bounds an address pool name, as the node config's names.
	maxPoolNameLen = 63
)

// listLen is the length of one list of a policy, by its field name.
type listLen struct {
	name string
	n    int
}

// boundLists refuses the lists longer than MaxPolicyEntries, before anything in them is
// parsed.
func boundLists(fldPath *field.Path, lists ...listLen) field.ErrorList {
	var errs field.ErrorList
	for _, l := range lists {
		if l.n > MaxPolicyEntries {
			errs = append(errs, field.TooMany(fldPath.Child(l.name), l.n, MaxPolicyEntries))
		}
	}
	return errs
}

// validate checks the policy's values.
func (p *NetworkPolicy) validate(fldPath *field.Path) field.ErrorList {
	errs := boundLists(fldPath,
		listLen{"modes", len(p.Modes)}, listLen{"addressPools", len(p.AddressPools)}, listLen{"staticAddressPrefixes", len(p.StaticAddressPrefixes)},
		listLen{"routePrefixes", len(p.RoutePrefixes)}, listLen{"interfaceNamePrefixes", len(p.InterfaceNamePrefixes)}, listLen{"pkeys", len(p.PKeys)},
	)
	if len(errs) > 0 {
		return errs
	}
	for i, m := range p.Modes {
		if !isOneOf(m, networkModes) {
			errs = append(errs, field.NotSupported(fldPath.Child("modes").Index(i), string(m), networkModes))
		}
	}
	for i, name := range p.AddressPools {
		if name == "" || len(name) > maxPoolNameLen {
			errs = append(errs, field.Invalid(fldPath.Child("addressPools").Index(i), truncate(name), fmt.Sprintf("must be the name of an address pool of the node configuration, 1 to %d characters", maxPoolNameLen)))
		}
	}
	for _, l := range []struct {
		name string
		v    []string
	}{{"staticAddressPrefixes", p.StaticAddressPrefixes}, {"routePrefixes", p.RoutePrefixes}} {
		for i, s := range l.v {
			if _, err := parsePolicyPrefix(s); err != nil {
				errs = append(errs, field.Invalid(fldPath.Child(l.name).Index(i), truncate(s), err.Error()))
			}
		}
	}
	for i, s := range p.InterfaceNamePrefixes {
		if msg := InterfaceNameError(s); msg != "" || len(s) >= 15 {
			if msg == "" {
				msg = "must leave room for at least one more character (15 at most in all)"
			}
			errs = append(errs, field.Invalid(fldPath.Child("interfaceNamePrefixes").Index(i), truncate(s), msg))
		}
	}
	if p.MaxMTU != nil && (*p.MaxMTU < MinMTU || *p.MaxMTU > MaxMTU) {
		errs = append(errs, field.Invalid(fldPath.Child("maxMTU"), *p.MaxMTU, fmt.Sprintf("must be from %d to %d", MinMTU, MaxMTU)))
	}
	for i, s := range p.PKeys {
		if _, err := ParsePKey(s); err != nil {
			errs = append(errs, field.Invalid(fldPath.Child("pkeys").Index(i), truncate(s), err.Error()))
		}
	}
	return errs
}

// parsePolicyPrefix parses an admin prefix: a masked prefix such as 192.168.77.0/24.
func parsePolicyPrefix(s string) (netip.Prefix, error) {
	if s == "default" {
		return netip.Prefix{}, fmt.Errorf("must be a prefix such as 192.168.77.0/24: write 0.0.0.0/0 or ::/0 for every address on purpose")
	}
	return ParseRouteDestination(s)
}

// PolicyOf returns the network policy of a class's configs (merged in order like Merge):
// their AllowedNetwork, with none and the class's own mode added to the modes. Nil
// configs are skipped; the result is never nil.
func PolicyOf(class []*RdmaConfig) *NetworkPolicy {
	limits := mergedLimits(class)
	out := &NetworkPolicy{}
	if limits.AllowedNetwork != nil {
		out = limits.AllowedNetwork.DeepCopy()
	}
	if n := limits.Network; n != nil && n.Mode != nil && n.Mode.Attaches() && !slices.Contains(out.Modes, *n.Mode) {
		out.Modes = append(out.Modes, *n.Mode)
	}
	return out
}

// AllowsMode reports whether a claim may ask for mode m.
func (p *NetworkPolicy) AllowsMode(m NetworkMode) bool {
	return !m.Attaches() || slices.Contains(p.Modes, m)
}

// AllowsPool reports whether ipam: node may take addresses from the named pool.
func (p *NetworkPolicy) AllowsPool(name string) bool {
	return slices.Contains(p.AddressPools, name)
}

// exceededNetwork reports the network fields set in claim (only what the claims set,
// not merged with the class) that the policy does not allow, at fldPath (the network
// section).
func (p *NetworkPolicy) exceededNetwork(fldPath *field.Path, claim *NetworkConfig) field.ErrorList {
	if claim == nil {
		return nil
	}
	var errs field.ErrorList
	forbid := func(child, msg string) {
		errs = append(errs, field.Forbidden(fldPath.Child(child), msg))
	}
	if claim.Mode != nil && !p.AllowsMode(*claim.Mode) {
		if len(p.Modes) == 0 {
			forbid("mode", fmt.Sprintf("%q is not allowed: the DeviceClass configures no network attachment (allowedNetwork.modes is empty)", *claim.Mode))
		} else {
			forbid("mode", fmt.Sprintf("%q is not allowed: the DeviceClass's allowedNetwork.modes are %s", *claim.Mode, joinQuoted(p.Modes)))
		}
	}
	if claim.IPAM != nil && *claim.IPAM == IPAMNode && len(p.AddressPools) == 0 {
		forbid("ipam", "node is not allowed: the DeviceClass's allowedNetwork.addressPools names no address pool")
	}
	if claim.InterfaceName != nil && !slices.ContainsFunc(p.InterfaceNamePrefixes, func(pre string) bool { return strings.HasPrefix(*claim.InterfaceName, pre) }) {
		if len(p.InterfaceNamePrefixes) == 0 {
			forbid("interfaceName", "is not allowed: the DeviceClass's allowedNetwork.interfaceNamePrefixes is empty, so the driver names the interface")
		} else {
			forbid("interfaceName", fmt.Sprintf("%q does not start with one of the DeviceClass's allowedNetwork.interfaceNamePrefixes %s", *claim.InterfaceName, joinQuoted(p.InterfaceNamePrefixes)))
		}
	}
	if claim.MTU != nil {
		switch {
		case p.MaxMTU == nil:
			forbid("mtu", "is not allowed: the DeviceClass's allowedNetwork.maxMTU is unset, so the port's MTU applies")
		case *claim.MTU > *p.MaxMTU:
			forbid("mtu", fmt.Sprintf("%d exceeds the DeviceClass's allowedNetwork.maxMTU %d", *claim.MTU, *p.MaxMTU))
		}
	}
	if claim.PKey != nil {
		want, err := ParsePKey(*claim.PKey)
		if err == nil && !slices.ContainsFunc(p.PKeys, func(s string) bool { v, err := ParsePKey(s); return err == nil && v == want }) {
			if len(p.PKeys) == 0 {
				forbid("pkey", "is not allowed: the DeviceClass's allowedNetwork.pkeys is empty")
			} else {
				forbid("pkey", fmt.Sprintf("%q is not one of the DeviceClass's allowedNetwork.pkeys %s", *claim.PKey, joinQuoted(p.PKeys)))
			}
		}
	}
	static := parsePrefixes(p.StaticAddressPrefixes)
	for i, a := range claim.Addresses {
		pfx, err := ParseInterfaceAddress(a)
		if err != nil {
			continue // Validate reports it
		}
		if len(static) == 0 {
			errs = append(errs, field.Forbidden(fldPath.Child("addresses").Index(i), "static addresses are not allowed: the DeviceClass's allowedNetwork.staticAddressPrefixes is empty (use ipam: node where the class allows it)"))
			continue
		}
		if msg := insideAdmin(pfx, static); msg != "" {
			errs = append(errs, field.Forbidden(fldPath.Child("addresses").Index(i), fmt.Sprintf("%s %s of the DeviceClass's allowedNetwork.staticAddressPrefixes %s", a, msg, joinQuoted(p.StaticAddressPrefixes))))
		}
	}
	routes := parsePrefixes(p.RoutePrefixes)
	for i, r := range claim.Routes {
		path := fldPath.Child("routes").Index(i)
		if len(routes) == 0 {
			errs = append(errs, field.Forbidden(path, "routes are not allowed: the DeviceClass's allowedNetwork.routePrefixes is empty"))
			continue
		}
		if dst, err := ParseRouteDestination(r.Destination); err == nil && !slices.ContainsFunc(routes, func(o netip.Prefix) bool { return covers(o, dst) }) {
			errs = append(errs, field.Forbidden(path.Child("destination"), fmt.Sprintf("%s is not inside one of the DeviceClass's allowedNetwork.routePrefixes %s", r.Destination, joinQuoted(p.RoutePrefixes))))
		}
		if gw, err := netip.ParseAddr(r.Gateway); err == nil && !slices.ContainsFunc(append(slices.Clone(routes), static...), func(o netip.Prefix) bool { return o.Contains(gw) }) {
			errs = append(errs, field.Forbidden(path.Child("gateway"), fmt.Sprintf("%s is not inside the DeviceClass's allowedNetwork.routePrefixes or staticAddressPrefixes", r.Gateway)))
		}
	}
	return errs
}

// insideAdmin returns why the interface address pfx does not fit one of the admin
// prefixes, or "": the address and its whole on-link prefix must lie inside one, and it
// must not be that prefix's network or (IPv4) broadcast address.
func insideAdmin(pfx netip.Prefix, admin []netip.Prefix) string {
	for _, o := range admin {
		if !o.Contains(pfx.Addr()) {
			continue
		}
		if pfx.Bits() < o.Bits() {
			return fmt.Sprintf("has a prefix length of %d, wider than the /%d", pfx.Bits(), o.Bits())
		}
		if pfx.Addr() == o.Addr() || (o.Addr().Is4() && o.Bits() < 31 && isBroadcast(netip.PrefixFrom(pfx.Addr(), o.Bits()))) {
			return "is the network or broadcast address of one"
		}
		return ""
	}
	return "is not inside one"
}

// covers reports whether prefix o contains all of prefix p.
func covers(o, p netip.Prefix) bool {
	return o.Addr().Is4() == p.Addr().Is4() && o.Bits() <= p.Bits() && o.Contains(p.Addr())
}

// parsePrefixes parses validated admin prefixes; invalid ones are left out (Validate
// reports them).
func parsePrefixes(ss []string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		if p, err := parsePolicyPrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// joinQuoted writes a list as ["a", "b"] for messages.
func joinQuoted[T ~string](vs []T) string {
	q := make([]string, len(vs))
	for i, v := range vs {
		q[i] = fmt.Sprintf("%q", v)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

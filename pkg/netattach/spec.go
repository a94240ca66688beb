package netattach

import (
	"errors"
	"fmt"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/pkg/sysfs"
)

// maxIfNameLen is the kernel's limit on interface names (IFNAMSIZ - 1).
const maxIfNameLen = 15

// withDefaults fills what a zero field means: port 1, the full default P_Key.
func (s Spec) withDefaults() Spec {
	if s.IBPort == 0 {
		s.IBPort = 1
	}
	if s.Mode == ModeIPoIB && s.PKey == 0 {
		s.PKey = 0xffff
	}
	return s
}

// gidDevice is the ibdev whose GID table holds the pod address's GID, or "" when no
// lookup is wanted. IPoIB has no RoCE GIDs.
func (s Spec) gidDevice() string {
	if s.Mode == ModeIPoIB || s.Mode == ModeNone {
		return ""
	}
	if s.IBDevice != "" {
		return s.IBDevice
	}
	return s.RDMADevice
}

// Validate reports what makes the spec unusable, all at once.
func (s Spec) Validate() error {
	var errs []error
	switch s.Mode {
	case ModeNone:
		return nil
	case ModeMacvlan, ModeIPVlan, ModeMove, ModeIPoIB:
	default:
		errs = append(errs, fmt.Errorf("unknown mode %q", s.Mode))
	}
	if err := validIfName(s.HostNetdev); err != nil {
		errs = append(errs, fmt.Errorf("hostNetdev: %w", err))
	}
	if err := validIfName(s.PodIfName); err != nil {
		errs = append(errs, fmt.Errorf("podIfName: %w", err))
	}
	if s.MTU != 0 && (s.MTU < 68 || s.MTU > 65535) {
		errs = append(errs, fmt.Errorf("mtu %d out of range 68-65535", s.MTU))
	}
	for _, p := range s.Addresses {
		if !p.IsValid() || p.Addr().Is4In6() || p.Addr().IsUnspecified() || p.Addr().IsMulticast() || p.Addr().Zone() != "" {
			errs = append(errs, fmt.Errorf("address %s is not a unicast address with a prefix length", p))
		}
	}
	for _, r := range s.Routes {
		if !r.Dst.IsValid() {
			errs = append(errs, errors.New("route without a destination"))
			continue
		}
		if r.Gateway.IsValid() && r.Gateway.Is4() != r.Dst.Addr().Is4() {
			errs = append(errs, fmt.Errorf("route %s: gateway %s of another address family", r.Dst, r.Gateway))
		}
	}
	if s.Mode == ModeIPoIB && s.PKey&0x7fff == 0 {
		errs = append(errs, fmt.Errorf("pkey 0x%04x is not a valid P_Key", s.PKey))
	}
	if s.Mode != ModeIPoIB && s.PKey != 0 {
		errs = append(errs, fmt.Errorf("pkey is only for mode %s", ModeIPoIB))
	}
	if s.KeepHostAddress && s.Mode != ModeMove {
		errs = append(errs, fmt.Errorf("keepHostAddress is only for mode %s", ModeMove))
	}
	if s.IBPort < 0 || s.IBPort > 255 {
		errs = append(errs, fmt.Errorf("ibPort %d out of range 1-255", s.IBPort))
	}
	for _, f := range []struct{ field, name string }{{"rdmaDevice", s.RDMADevice}, {"ibDevice", s.IBDevice}} {
		if _, err := sysfs.ParseDeviceName(f.name); f.name != "" && err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", f.field, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid attachment spec: %w", err)
	}
	return nil
}

// validIfName applies the kernel's rules for interface names (dev_valid_name).
func validIfName(name string) error {
	switch {
	case name == "":
		return errors.New("empty interface name")
	case len(name) > maxIfNameLen:
		return fmt.Errorf("interface name %q longer than %d bytes", name, maxIfNameLen)
	case name == "." || name == "..":
		return fmt.Errorf("invalid interface name %q", name)
	case strings.ContainsAny(name, "/: \t\n"):
		return fmt.Errorf("interface name %q contains '/', ':' or white space", name)
	}
	return nil
}

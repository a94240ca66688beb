package nodeconfig

import (
	"path"
	"slices"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Selects reports whether the configuration publishes port p: it matches some Include
// selector (or Include is empty) and no Exclude selector.
func (c *Config) Selects(p *discovery.Port) bool {
	included := len(c.Include) == 0
	for i := range c.Include {
		if c.Include[i].Matches(p) {
			included = true
			break
		}
	}
	if !included {
		return false
	}
	for i := range c.Exclude {
		if c.Exclude[i].Matches(p) {
			return false
		}
	}
	return true
}

// Matches reports whether port p matches every non-empty field of the selector. A fact
// the port does not have (a virtual device has no PCI address) matches no entry.
func (s *Selector) Matches(p *discovery.Port) bool {
	return matchExact(s.Vendors, p.VendorID) &&
		matchExact(s.DeviceIDs, p.DeviceID) &&
		matchExact(s.Drivers, p.Driver) &&
		matchPattern(s.IBDevs, p.IBDev) &&
		matchPattern(s.IfNames, p.Netdev) &&
		matchExact(s.LinkTypes, p.LinkLayer) &&
		matchPattern(s.PCIAddresses, p.PCIBusID) &&
		matchPattern(s.PortGUIDs, p.PortGUID)
}

func matchExact(want []string, have string) bool {
	return len(want) == 0 || (have != "" && slices.Contains(want, have))
}

func matchPattern(patterns []string, have string) bool {
	if len(patterns) == 0 {
		return true
	}
	if have == "" {
		return false
	}
	for _, pattern := range patterns {
		// Patterns are validated, so an error cannot happen for a validated Config;
		// an unvalidated malformed pattern simply matches nothing.
		if ok, err := path.Match(pattern, have); err == nil && ok {
			return true
		}
	}
	return false
}

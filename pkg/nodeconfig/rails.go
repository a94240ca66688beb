package nodeconfig

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Bounds of the rails section.
const (
	// MaxRail bounds Rail.Rail, and so the number of rails (each is listed once): the
	// largest nodes have 8 to 16 compute rails, and a bound catches a typo.
	MaxRail = 63
	// MaxRailSelectors bounds the selectors of one rail. Load compares every selector
	// with those of the other rails, so the bound keeps that quick.
	MaxRailSelectors = 64
)

// Rail is one rail of the node: the ports its selectors match are published with the
// attribute rdma.dra.io/rail = Rail (docs/device-model.md, "Rails and accelerator
// pairing"). Nothing on the node tells which leaf switch a port is cabled to without
// querying the fabric, so the admin says it; one file fits a node pool because rails
// follow PCI slots.
type Rail struct {
	// Rail is the rail number, 0..MaxRail. Required, and each number is listed once.
	Rail *int `json:"rail"`
	// Selectors choose the rail's ports among the published ones: a port is on the rail
	// when it matches any of them. At least one, up to MaxRailSelectors, none empty.
	Selectors []Selector `json:"selectors"`
}

// Matches reports whether port p matches one of the rail's selectors.
func (r *Rail) Matches(p *discovery.Port) bool {
	for i := range r.Selectors {
		if r.Selectors[i].Matches(p) {
			return true
		}
	}
	return false
}

// RailOf returns the rail of port p: that of the rails entry whose selectors match it.
// ok is false when no entry matches p, and also when entries of different rails match it:
// err then names them. Validate refuses the overlaps it can see without ports (a
// selector that matches every port another rail's selector matches); the rest depend on
// the ports' facts and show only here, and such a port is published without a rail.
func (c *Config) RailOf(p *discovery.Port) (rail int, ok bool, err error) {
	var matched []int
	for i := range c.Rails {
		if c.Rails[i].Rail != nil && c.Rails[i].Matches(p) {
			matched = append(matched, i)
		}
	}
	switch len(matched) {
	case 0:
		return 0, false, nil
	case 1:
		return *c.Rails[matched[0]].Rail, true, nil
	}
	names := make([]string, len(matched))
	for k, i := range matched {
		names[k] = fmt.Sprintf("rails[%d] (rail %d)", i, *c.Rails[i].Rail)
	}
	last := len(names) - 1
	return 0, false, fmt.Errorf("%s and %s of the node configuration match the port, and a port is on one rail: make their selectors disjoint",
		strings.Join(names[:last], ", "), names[last])
}

func (c *Config) setRailDefaults() {
	for i := range c.Rails {
		for j := range c.Rails[i].Selectors {
			c.Rails[i].Selectors[j].normalize()
		}
	}
}

func (c *Config) validateRails() field.ErrorList {
	var errs field.ErrorList
	list := field.NewPath("rails")
	if len(c.Rails) > MaxRail+1 {
		errs = append(errs, field.TooMany(list, len(c.Rails), MaxRail+1))
	}
	seen := map[int]int{} // rail -> its entry
	for i := range c.Rails {
		r := &c.Rails[i]
		p := list.Index(i)
		switch {
		case r.Rail == nil:
			errs = append(errs, field.Required(p.Child("rail"), fmt.Sprintf("the rail number of the entry's ports, 0..%d", MaxRail)))
		case *r.Rail < 0 || *r.Rail > MaxRail:
			errs = append(errs, field.Invalid(p.Child("rail"), *r.Rail, fmt.Sprintf("must be between 0 and %d", MaxRail)))
		default:
			if j, dup := seen[*r.Rail]; dup {
				errs = append(errs, field.Duplicate(p.Child("rail"), fmt.Sprintf("%d (also rails[%d]): list each rail once, with all its selectors", *r.Rail, j)))
			} else {
				seen[*r.Rail] = i
			}
		}
		sels := p.Child("selectors")
		switch {
		case len(r.Selectors) == 0:
			errs = append(errs, field.Required(sels, "at least one selector of the rail's ports"))
		case len(r.Selectors) > MaxRailSelectors:
			errs = append(errs, field.TooMany(sels, len(r.Selectors), MaxRailSelectors))
		}
		for j := range r.Selectors {
			s := &r.Selectors[j]
			if s.isEmpty() {
				errs = append(errs, field.Required(sels.Index(j), "an empty selector matches every port, which cannot all be on one rail"))
				continue
			}
			errs = append(errs, s.validate(sels.Index(j))...)
		}
	}
	return append(errs, c.railOverlaps()...)
}

// railOverlaps reports the selectors of two rails that certainly match the same ports:
// one of them matches every port the other matches (covers), which is decidable without
// ports for names, exact values and a pattern against a name. Whether two patterns, or
// selectors on different facts (a PCI address and a netdev), meet depends on the ports;
// RailOf reports that case. Entries with the same rail number are refused as duplicates
// already.
func (c *Config) railOverlaps() field.ErrorList {
	var errs field.ErrorList
	for i := range c.Rails {
		for k := range i {
			a, b := &c.Rails[k], &c.Rails[i]
			if a.Rail == nil || b.Rail == nil || *a.Rail == *b.Rail {
				continue
			}
			for j := range b.Selectors {
				for l := range a.Selectors {
					sb, sa := &b.Selectors[j], &a.Selectors[l]
					if sa.isEmpty() || sb.isEmpty() {
						continue // refused on their own
					}
					other := fmt.Sprintf("rails[%d].selectors[%d] (rail %d)", k, l, *a.Rail)
					p := field.NewPath("rails").Index(i).Child("selectors").Index(j)
					switch {
					case sa.covers(sb):
						errs = append(errs, field.Forbidden(p, "every port it matches is matched by "+other+" too, and a port is on one rail"))
					case sb.covers(sa):
						errs = append(errs, field.Forbidden(p, "it matches every port that "+other+" matches, and a port is on one rail"))
					}
				}
			}
		}
	}
	return errs
}

// covers reports whether every port that t matches is certainly matched by s: every
// field s sets is set by t too, and each of t's entries there is one of s's, or a name
// that one of s's patterns matches. False when that cannot be known without ports.
func (s *Selector) covers(t *Selector) bool {
	return coversExact(s.Vendors, t.Vendors) &&
		coversExact(s.DeviceIDs, t.DeviceIDs) &&
		coversExact(s.Drivers, t.Drivers) &&
		coversPattern(s.IBDevs, t.IBDevs) &&
		coversPattern(s.IfNames, t.IfNames) &&
		coversExact(s.LinkTypes, t.LinkTypes) &&
		coversPattern(s.PCIAddresses, t.PCIAddresses) &&
		coversPattern(s.PortGUIDs, t.PortGUIDs)
}

func coversExact(s, t []string) bool {
	if len(s) == 0 {
		return true
	}
	if len(t) == 0 {
		return false
	}
	for _, v := range t {
		if !slices.Contains(s, v) {
			return false
		}
	}
	return true
}

func coversPattern(s, t []string) bool {
	if len(s) == 0 {
		return true
	}
	if len(t) == 0 {
		return false
	}
	for _, v := range t {
		if !slices.ContainsFunc(s, func(pattern string) bool {
			if pattern == v {
				return true
			}
			ok, err := path.Match(pattern, v)
			return !isPattern(v) && err == nil && ok
		}) {
			return false
		}
	}
	return true
}

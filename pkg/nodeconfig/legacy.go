package nodeconfig

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Bounds and defaults of a legacy resource.
const (
	// DefaultLegacyPods is MaxPods when an entry does not say. k8s-rdma-shared-dev-plugin
	// has no default (its rdmaHcaMax is required; `rdma-dra migrate` copies it); 1000 is
	// the value its documented examples use.
	DefaultLegacyPods = 1000
	// MaxLegacyPods bounds MaxPods. It is a scheduling budget, like Shares.
	MaxLegacyPods = 65536
	// MaxLegacyResourceNameLength bounds LegacyResource.Name, the name of its pool: the
	// device it is published as, "legacy-" + Name, must be a DNS label.
	MaxLegacyResourceNameLength = v1alpha1.MaxLegacyPoolNameLength
	// MaxLegacyResources bounds the list; each entry is a device of every node.
	MaxLegacyResources = 16
)

// LegacyDevicePrefix starts the name of the device a legacy resource is published as.
const LegacyDevicePrefix = v1alpha1.LegacyDevicePrefix

// LegacyResource is one resource of k8s-rdma-shared-dev-plugin whose unit the node keeps:
// one allocation gets every published port that Selectors match on the node, and up to
// MaxPods allocations (its rdmaHcaMax) hold it at once. The RdmaPool of mode legacy named
// Name serves it; `rdma-dra migrate` writes both.
type LegacyResource struct {
	// Name is the name of the RdmaPool that serves the resource: a DNS label of at most
	// MaxLegacyResourceNameLength characters. The device is LegacyDevicePrefix + Name.
	Name string `json:"name"`
	// MaxPods is how many claims may hold the resource on the node at once (the device
	// plugin's rdmaHcaMax); default DefaultLegacyPods, 1..MaxLegacyPods.
	MaxPods int `json:"maxPods,omitempty"`
	// Selectors choose the ports among those the node publishes (Include and Exclude);
	// an empty selector takes every published port.
	Selectors Selector `json:"selectors,omitempty"`
}

// DeviceName is the name of the device the resource is published as.
func (r *LegacyResource) DeviceName() string { return v1alpha1.LegacyDeviceName(r.Name) }

// Matches reports whether the resource takes port p (which the node publishes).
func (r *LegacyResource) Matches(p *discovery.Port) bool { return r.Selectors.Matches(p) }

func (c *Config) setLegacyResourceDefaults() {
	for i := range c.LegacyResources {
		r := &c.LegacyResources[i]
		if r.MaxPods == 0 {
			r.MaxPods = DefaultLegacyPods
		}
		r.Selectors.normalize()
	}
}

func (c *Config) validateLegacyResources() field.ErrorList {
	var errs field.ErrorList
	list := field.NewPath("legacyResources")
	if len(c.LegacyResources) > MaxLegacyResources {
		errs = append(errs, field.TooMany(list, len(c.LegacyResources), MaxLegacyResources))
	}
	seen := map[string]int{}
	for i := range c.LegacyResources {
		r := &c.LegacyResources[i]
		p := list.Index(i)
		switch msgs := validation.IsDNS1123Label(r.Name); {
		case r.Name == "":
			errs = append(errs, field.Required(p.Child("name"), "the name of the RdmaPool (mode legacy) that serves the resource"))
		case len(msgs) > 0:
			errs = append(errs, field.Invalid(p.Child("name"), r.Name, strings.Join(msgs, "; ")))
		case len(r.Name) > MaxLegacyResourceNameLength:
			errs = append(errs, field.TooLong(p.Child("name"), r.Name, MaxLegacyResourceNameLength))
		}
		if j, dup := seen[r.Name]; dup && r.Name != "" {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also legacyResources[%d])", r.Name, j)))
		} else {
			seen[r.Name] = i
		}
		if r.MaxPods < 1 || r.MaxPods > MaxLegacyPods {
			errs = append(errs, field.Invalid(p.Child("maxPods"), r.MaxPods, fmt.Sprintf("must be between 1 and %d", MaxLegacyPods)))
		}
		errs = append(errs, r.Selectors.validate(p.Child("selectors"))...)
	}
	return errs
}

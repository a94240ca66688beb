package nodeconfig

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// Bounds and default of FabricReadiness.TimeoutSeconds.
const (
	// DefaultFabricTimeoutSeconds is how long a claim waits for its ports when the file
	// does not say: half of the scheduler's default binding timeout (600 s), so that the
	// plugin's failure, which says what was missing, comes first.
	DefaultFabricTimeoutSeconds = 300
	// MaxFabricTimeoutSeconds bounds it from above; the scheduler's own binding timeout
	// (600 s by default) ends the wait anyway when it is shorter.
	MaxFabricTimeoutSeconds = 3600
)

// FabricReadiness makes the allocations of some ports wait, before their pods are bound,
// until the port is ready for traffic (docs/device-model.md, "Fabric readiness"). The
// devices of a gated port carry the binding conditions devicemodel.FabricReadyCondition
// and devicemodel.FabricFailedCondition; the kubelet plugin sets them in the claim's
// status once it has read the port, and prepare checks the same before it writes the CDI
// spec where the API server drops binding conditions (before 1.36).
type FabricReadiness struct {
	// Enabled gates the ports that Include and Exclude select; default false: none.
	Enabled bool `json:"enabled,omitempty"`
	// Include selects the gated ports among the published ones: a port is gated when it
	// matches any selector. An empty list selects every published port.
	Include []Selector `json:"include,omitempty"`
	// Exclude drops the ports that match any of its selectors, after Include.
	Exclude []Selector `json:"exclude,omitempty"`
	// TimeoutSeconds is how long after its allocation a claim waits for its ports before
	// the plugin reports the binding as failed, so that the scheduler tries again
	// (elsewhere if it can); 1..MaxFabricTimeoutSeconds, 0 for
	// DefaultFabricTimeoutSeconds. The scheduler looks at the conditions every 5 s, and a
	// subnet manager needs a few sweeps to bring a port up: less than a minute rarely helps. It stays 0 after defaulting (Timeout applies the
	// default), so that a configuration without the section equals Default().
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
}

// Gates reports whether the allocations of port p wait for the fabric: readiness is
// enabled, p matches some Include selector (or Include is empty) and no Exclude
// selector. The caller decides whether p is published at all (Config.Selects).
func (f *FabricReadiness) Gates(p *discovery.Port) bool {
	if !f.Enabled {
		return false
	}
	included := len(f.Include) == 0
	for i := range f.Include {
		if f.Include[i].Matches(p) {
			included = true
			break
		}
	}
	if !included {
		return false
	}
	for i := range f.Exclude {
		if f.Exclude[i].Matches(p) {
			return false
		}
	}
	return true
}

// Timeout is TimeoutSeconds as a duration, DefaultFabricTimeoutSeconds for 0.
func (f *FabricReadiness) Timeout() time.Duration {
	if f.TimeoutSeconds == 0 {
		return DefaultFabricTimeoutSeconds * time.Second
	}
	return time.Duration(f.TimeoutSeconds) * time.Second
}

func (c *Config) setFabricDefaults() {
	f := &c.FabricReadiness
	for i := range f.Include {
		f.Include[i].normalize()
	}
	for i := range f.Exclude {
		f.Exclude[i].normalize()
	}
}

func (c *Config) validateFabric() field.ErrorList {
	var errs field.ErrorList
	f := &c.FabricReadiness
	p := field.NewPath("fabricReadiness")
	if f.TimeoutSeconds < 0 || f.TimeoutSeconds > MaxFabricTimeoutSeconds {
		errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), f.TimeoutSeconds,
			fmt.Sprintf("must be between 1 and %d, or 0 for the default %d", MaxFabricTimeoutSeconds, DefaultFabricTimeoutSeconds)))
	}
	for i := range f.Include {
		errs = append(errs, f.Include[i].validate(p.Child("include").Index(i))...)
	}
	for i := range f.Exclude {
		errs = append(errs, f.Exclude[i].validate(p.Child("exclude").Index(i))...)
	}
	return errs
}

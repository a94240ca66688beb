package nodeconfig

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Defaults and bounds of FlappingConfig.
const (
	// DefaultFlappingWindowSeconds is how far back link downs and symbol errors are
	// counted: long enough that a link which drops every few minutes counts twice.
	DefaultFlappingWindowSeconds = 600
	// DefaultFlappingQuietSeconds is how long a flapping port must stay under the
	// thresholds before its taint goes: a link that was reseated or whose cable was
	// changed has proved itself for that long.
	DefaultFlappingQuietSeconds = 600
	// MaxFlappingSeconds bounds both windows: a day.
	MaxFlappingSeconds = 86400
	// DefaultFlappingLinkDowned is how many link downs within the window taint a port:
	// one is an outage (or a reboot of the switch) that the port state shows; a second
	// within ten minutes is a link that does not hold.
	DefaultFlappingLinkDowned = 2
	// MaxFlappingLinkDowned is link_downed's maximum: the counter has 8 bits and stops
	// there.
	MaxFlappingLinkDowned = 255
	// DefaultFlappingSymbolErrors is how many symbol errors within the window taint a
	// port: a healthy link counts a few a day at most, a bad cable or transceiver
	// hundreds a minute.
	DefaultFlappingSymbolErrors = 100
	// MaxFlappingSymbolErrors is symbol_error's maximum: 16 bits, where it stops.
	MaxFlappingSymbolErrors = 65535
)

// HealthConfig configures the kubelet plugin's port health checks beyond the port state
// (docs/health.md).
type HealthConfig struct {
	// Flapping says when a port is tainted as flapping.
	Flapping FlappingConfig `json:"flapping,omitempty"`
}

// FlappingConfig says when a port is flapping: its link went down repeatedly, or its
// lanes saw many symbol errors, within a window, whatever its state is now. The devices
// of a flapping port carry the taint rdma.dra.io/port-flapping until the port has stayed
// under both thresholds for the quiet window (docs/health.md, "Flapping ports").
//
// Zero values stand for the defaults and stay zero after SetDefaults (the methods apply
// them), so that a configuration without the section equals Default().
type FlappingConfig struct {
	// Disabled turns the check off: no port is tainted as flapping.
	Disabled bool `json:"disabled,omitempty"`
	// WindowSeconds is how far back increases of link_downed and symbol_error are
	// counted; 1..MaxFlappingSeconds, 0 for DefaultFlappingWindowSeconds.
	WindowSeconds int `json:"windowSeconds,omitempty"`
	// LinkDowned is how many increases of link_downed within the window make the port
	// flapping; 1..MaxFlappingLinkDowned, 0 for DefaultFlappingLinkDowned.
	LinkDowned int `json:"linkDowned,omitempty"`
	// SymbolErrors is how many increases of symbol_error within the window make the port
	// flapping; 1..MaxFlappingSymbolErrors, 0 for DefaultFlappingSymbolErrors.
	SymbolErrors int `json:"symbolErrors,omitempty"`
	// QuietSeconds is how long a flapping port must stay under both thresholds before
	// its taint is removed; 1..MaxFlappingSeconds, 0 for DefaultFlappingQuietSeconds.
	QuietSeconds int `json:"quietSeconds,omitempty"`
}

// Window returns WindowSeconds as a duration, the default for 0.
func (f *FlappingConfig) Window() time.Duration {
	return seconds(f.WindowSeconds, DefaultFlappingWindowSeconds)
}

// Quiet returns QuietSeconds as a duration, the default for 0.
func (f *FlappingConfig) Quiet() time.Duration {
	return seconds(f.QuietSeconds, DefaultFlappingQuietSeconds)
}

// Thresholds returns LinkDowned and SymbolErrors, the defaults for 0.
func (f *FlappingConfig) Thresholds() (linkDowned, symbolErrors int) {
	linkDowned, symbolErrors = f.LinkDowned, f.SymbolErrors
	if linkDowned == 0 {
		linkDowned = DefaultFlappingLinkDowned
	}
	if symbolErrors == 0 {
		symbolErrors = DefaultFlappingSymbolErrors
	}
	return linkDowned, symbolErrors
}

func seconds(v, def int) time.Duration {
	if v == 0 {
		v = def
	}
	return time.Duration(v) * time.Second
}

func (c *Config) validateHealth() field.ErrorList {
	var errs field.ErrorList
	f := &c.Health.Flapping
	p := field.NewPath("health", "flapping")
	bound := func(name string, v, max, def int) {
		if v < 0 || v > max {
			errs = append(errs, field.Invalid(p.Child(name), v, fmt.Sprintf("must be between 1 and %d, or 0 for the default %d", max, def)))
		}
	}
	bound("windowSeconds", f.WindowSeconds, MaxFlappingSeconds, DefaultFlappingWindowSeconds)
	bound("linkDowned", f.LinkDowned, MaxFlappingLinkDowned, DefaultFlappingLinkDowned)
	bound("symbolErrors", f.SymbolErrors, MaxFlappingSymbolErrors, DefaultFlappingSymbolErrors)
	bound("quietSeconds", f.QuietSeconds, MaxFlappingSeconds, DefaultFlappingQuietSeconds)
	return errs
}

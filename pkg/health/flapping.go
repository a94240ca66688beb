package health

import (
	"fmt"
	"slices"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/pkg/portcounters"
)

// FlapOptions are the thresholds of the flapping check.
type FlapOptions struct {
	// Window is how far back increases are counted.
	Window time.Duration
	// Quiet is how long a flapping port must stay under both thresholds before it is no
	// longer flapping.
	Quiet time.Duration
	// LinkDowned and SymbolErrors are the increases of link_downed and symbol_error
	// within Window that make a port flapping; 0 never does.
	LinkDowned, SymbolErrors uint64
}

// FlapOptionsFrom returns the thresholds of a node configuration; a disabled check has
// none.
func FlapOptionsFrom(c nodeconfig.FlappingConfig) FlapOptions {
	if c.Disabled {
		return FlapOptions{}
	}
	ld, se := c.Thresholds()
	return FlapOptions{Window: c.Window(), Quiet: c.Quiet(), LinkDowned: uint64(ld), SymbolErrors: uint64(se)}
}

// Enabled reports whether any threshold is set.
func (o FlapOptions) Enabled() bool { return o.LinkDowned > 0 || o.SymbolErrors > 0 }

// flapBuckets bounds the increases kept per port: those that come closer together than
// Window/flapBuckets are added up in one, so that a port whose symbol errors rise on
// every poll keeps at most flapBuckets+1 entries however short the poll interval.
const flapBuckets = 64

// FlapDetector decides which ports flap from successive readings of their link_downed
// and symbol_error counters (the health poll's, every poll interval).
//
// A port flaps from the first reading at which the increases within the last Window
// reach a threshold (link downs first: they name the taint when both do) until Quiet
// has passed since the last reading at which they did. The first reading of a port is
// its baseline, so that what a port counted before the plugin started never counts; an
// increase is portcounters.Delta of two readings, so a counter that was reset (a
// reloaded driver) counts from zero. A file that cannot be read keeps the baseline: its
// increase shows when it reads again.
//
// Invariant: events of a port are in time order, none older than Window at the last
// Observe, at most flapBuckets+1 of them. A FlapDetector is not safe for concurrent use.
type FlapDetector struct {
	opts  FlapOptions
	ports map[PortID]*flapState
}

// flapState is what the detector knows of one port.
type flapState struct {
	linkDowned, symbolError       uint64
	hasLinkDowned, hasSymbolError bool
	events                        []flapEvent
	// value is the taint's value while the port flaps, empty otherwise; lastOver is the
	// last reading at which it was over a threshold.
	value    string
	lastOver time.Time
}

// flapEvent is the increases seen at one time (or added up over a bucket).
type flapEvent struct {
	at                       time.Time
	linkDowned, symbolErrors uint64
}

// FlapChange is a port that started or stopped flapping.
type FlapChange struct {
	Port PortID
	// Value is the taint's value now, empty when the port stopped flapping; Was is the
	// one before.
	Value, Was string
	// LinkDowned and SymbolErrors are the increases within the window at the change.
	LinkDowned, SymbolErrors uint64
	// Gone is true when the port stopped flapping because it is no longer published.
	Gone bool
}

// describe is the event message: "mlx5_0 port 1 is flapping: link_downed rose by 2
// within 10m0s", "mlx5_0 port 1 stopped flapping: quiet for 10m0s".
func (c FlapChange) describe(opts FlapOptions) string {
	switch {
	case c.Gone:
		return fmt.Sprintf("%s stopped flapping: no longer published", c.Port)
	case c.Value == "":
		return fmt.Sprintf("%s stopped flapping: quiet for %s", c.Port, opts.Quiet)
	case c.Value == devicemodel.FlappingLinkDowned:
		return fmt.Sprintf("%s is flapping: link_downed rose by %d within %s", c.Port, c.LinkDowned, opts.Window)
	default:
		return fmt.Sprintf("%s is flapping: symbol_error rose by %d within %s", c.Port, c.SymbolErrors, opts.Window)
	}
}

// NewFlapDetector returns a detector with the thresholds of opts.
func NewFlapDetector(opts FlapOptions) *FlapDetector {
	return &FlapDetector{opts: opts, ports: map[PortID]*flapState{}}
}

// Observe takes the readings of one poll at now and returns the ports that started or
// stopped flapping, sorted. Ports missing from readings are forgotten: they are no
// longer published.
func (d *FlapDetector) Observe(now time.Time, readings []portcounters.LinkErrors) []FlapChange {
	var changes []FlapChange
	seen := make(map[PortID]bool, len(readings))
	for i := range readings {
		r := &readings[i]
		id := PortID{r.IBDev, r.Port.Port}
		seen[id] = true
		st := d.ports[id]
		if st == nil {
			st = &flapState{}
			d.ports[id] = st
		}
		var ev flapEvent
		if r.HasLinkDowned {
			if st.hasLinkDowned {
				ev.linkDowned = portcounters.Delta(st.linkDowned, r.LinkDowned)
			}
			st.linkDowned, st.hasLinkDowned = r.LinkDowned, true
		}
		if r.HasSymbolError {
			if st.hasSymbolError {
				ev.symbolErrors = portcounters.Delta(st.symbolError, r.SymbolError)
			}
			st.symbolError, st.hasSymbolError = r.SymbolError, true
		}
		if c, ok := d.update(st, id, now, ev); ok {
			changes = append(changes, c)
		}
	}
	for id, st := range d.ports {
		if !seen[id] {
			if st.value != "" {
				changes = append(changes, FlapChange{Port: id, Was: st.value, Gone: true})
			}
			delete(d.ports, id)
		}
	}
	slices.SortFunc(changes, func(a, b FlapChange) int { return comparePortIDs(a.Port, b.Port) })
	return changes
}

// update records ev of one port at now and decides whether it flaps.
func (d *FlapDetector) update(st *flapState, id PortID, now time.Time, ev flapEvent) (FlapChange, bool) {
	if ev.linkDowned > 0 || ev.symbolErrors > 0 {
		ev.at = now
		if n := len(st.events); n > 0 && now.Sub(st.events[n-1].at) < d.opts.Window/flapBuckets {
			st.events[n-1].linkDowned += ev.linkDowned
			st.events[n-1].symbolErrors += ev.symbolErrors
		} else {
			st.events = append(st.events, ev)
		}
	}
	keep := 0
	for keep < len(st.events) && now.Sub(st.events[keep].at) >= d.opts.Window {
		keep++
	}
	st.events = slices.Delete(st.events, 0, keep)
	var linkDowned, symbolErrors uint64
	for _, e := range st.events {
		linkDowned += e.linkDowned
		symbolErrors += e.symbolErrors
	}
	value := ""
	switch {
	case d.opts.LinkDowned > 0 && linkDowned >= d.opts.LinkDowned:
		value = devicemodel.FlappingLinkDowned
	case d.opts.SymbolErrors > 0 && symbolErrors >= d.opts.SymbolErrors:
		value = devicemodel.FlappingSymbolErrors
	}
	was := st.value
	switch {
	case value != "":
		st.lastOver = now
		st.value = value
	case st.value != "" && now.Sub(st.lastOver) >= d.opts.Quiet:
		st.value = ""
	}
	if st.value == was {
		return FlapChange{}, false
	}
	return FlapChange{Port: id, Value: st.value, Was: was, LinkDowned: linkDowned, SymbolErrors: symbolErrors}, true
}

// Flapping returns the ports that flap now and the value of their taint.
func (d *FlapDetector) Flapping() map[PortID]string {
	out := map[PortID]string{}
	for id, st := range d.ports {
		if st.value != "" {
			out[id] = st.value
		}
	}
	return out
}

// equalFlaps reports whether two sets of flapping ports are the same.
func equalFlaps(a map[PortID]string, b map[devicemodel.PortID]string) bool {
	if len(a) != len(b) {
		return false
	}
	for id, v := range a {
		if w, ok := b[devicemodel.PortID{IBDev: id.IBDev, Port: id.Port}]; !ok || w != v {
			return false
		}
	}
	return true
}

// toModel converts a set of flapping ports to the device model's keys.
func toModel(flaps map[PortID]string) map[devicemodel.PortID]string {
	out := make(map[devicemodel.PortID]string, len(flaps))
	for id, v := range flaps {
		out[devicemodel.PortID{IBDev: id.IBDev, Port: id.Port}] = v
	}
	return out
}

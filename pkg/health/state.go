// Package health watches the node's RDMA ports between full scans and reports their
// health: it polls each port's state files and the list of RDMA devices, listens to
// rtnetlink for netdev changes, tells the publisher when the node must be looked at again,
// streams device health to the kubelet (DRAResourceHealth), records port state metrics and
// emits Node events when a published port changes state.
//
// Discovery stays the single source of facts that are published: this package only
// decides when to run it, and reads the few files it polls with the same parsers.
package health

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// StateActive is the logical port state of a usable port; every other state is unhealthy.
const StateActive = "ACTIVE"

// PortID names one port of one RDMA device.
type PortID struct {
	IBDev string
	Port  int
}

// String returns "mlx5_0 port 1", the way messages and events name a port.
func (id PortID) String() string { return id.IBDev + " port " + strconv.Itoa(id.Port) }

func comparePortIDs(a, b PortID) int {
	return cmp.Or(cmp.Compare(a.IBDev, b.IBDev), cmp.Compare(a.Port, b.Port))
}

// PortState is what the poller reads of a port: the logical and the physical state names.
// An empty name means the file was missing or unreadable, as in the inventory.
type PortState struct {
	State, PhysState string
}

// Healthy reports whether the port can carry traffic.
func (s PortState) Healthy() bool { return s.State == StateActive }

// String returns "ACTIVE (LinkUp)", "DOWN (Disabled)", or "Unknown" for what could not be read.
func (s PortState) String() string {
	state := s.State
	if state == "" {
		state = "Unknown"
	}
	if s.PhysState == "" {
		return state
	}
	return state + " (" + s.PhysState + ")"
}

// statesOf returns the state of every port of inv.
func statesOf(inv *discovery.Inventory) map[PortID]PortState {
	out := make(map[PortID]PortState, len(inv.Ports))
	for _, p := range inv.Ports {
		out[PortID{p.IBDev, p.Port}] = PortState{State: p.State, PhysState: p.PhysState}
	}
	return out
}

// TransitionKind says what happened to a port between two inventories.
type TransitionKind string

// Transition kinds.
const (
	PortAdded   TransitionKind = "added"
	PortRemoved TransitionKind = "removed"
	PortChanged TransitionKind = "changed"
)

// Transition is one port's change between two inventories.
type Transition struct {
	Port     PortID
	Kind     TransitionKind
	Old, New PortState
}

// String is the event message: "mlx5_0 port 1: ACTIVE (LinkUp) -> DOWN (Disabled)".
func (t Transition) String() string {
	switch t.Kind {
	case PortAdded:
		return fmt.Sprintf("%s appeared: %s", t.Port, t.New)
	case PortRemoved:
		return fmt.Sprintf("%s disappeared (was %s)", t.Port, t.Old)
	default:
		return fmt.Sprintf("%s: %s -> %s", t.Port, t.Old, t.New)
	}
}

// Diff returns the ports whose state changed, appeared or disappeared from old to new,
// sorted by port. A nil old (the first scan) yields nothing: there is no change to report.
func Diff(old, new *discovery.Inventory) []Transition {
	if old == nil || new == nil {
		return nil
	}
	before, after := statesOf(old), statesOf(new)
	var out []Transition
	for id, n := range after {
		o, ok := before[id]
		switch {
		case !ok:
			out = append(out, Transition{Port: id, Kind: PortAdded, New: n})
		case o != n:
			out = append(out, Transition{Port: id, Kind: PortChanged, Old: o, New: n})
		}
	}
	for id, o := range before {
		if _, ok := after[id]; !ok {
			out = append(out, Transition{Port: id, Kind: PortRemoved, Old: o})
		}
	}
	slices.SortFunc(out, func(a, b Transition) int { return comparePortIDs(a.Port, b.Port) })
	return out
}

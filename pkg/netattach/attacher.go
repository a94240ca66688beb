package netattach

import (
	"context"
	"errors"
	"net/netip"

	"k8s.io/utils/clock"
)

// ErrNamespaceGone is wrapped by Namespaces.Open when the pod's namespace no longer exists.
var ErrNamespaceGone = errors.New("network namespace is gone")

// NewAttacher returns an Attacher for the options.
func NewAttacher(opts Options) *Attacher {
	a := &Attacher{ns: opts.Namespaces, kernel: opts.Kernel, clock: opts.Clock, tempPrefix: opts.TempPrefix}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.tempPrefix == "" {
		a.tempPrefix = "rdt"
	}
	return a
}

// Attach attaches spec into target. On failure it undoes what it did (best
// effort) and returns the error; the journal reflects reality at every point.
func (a *Attacher) Attach(ctx context.Context, spec Spec, target Target, save Journal) (State, error) {
	return State{}, errors.New("not implemented")
}

// Detach undoes st. It is idempotent and works from any Phase.
func (a *Attacher) Detach(ctx context.Context, st State, save Journal) error {
	return errors.New("not implemented")
}

// CheckNotPrimary refuses a netdev that carries the host's default route or one of nodeIPs.
func CheckNotPrimary(nl Netlink, netdev string, nodeIPs []netip.Addr) error {
	return errors.New("not implemented")
}

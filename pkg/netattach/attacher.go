package netattach

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrNamespaceGone is wrapped by Namespaces.Open when the pod's namespace no longer exists.
var ErrNamespaceGone = errors.New("network namespace is gone")

// ErrNameTaken is wrapped by Attach when the pod already has an interface of the
// requested name (and it is not this attachment's).
var ErrNameTaken = errors.New("interface name already taken in the pod")

// ErrHostNamespace is wrapped by Attach when the pod's namespace is the host's own
// (a hostNetwork pod): there is nothing to attach into; and by Detach when a State
// names the host's namespace as the pod's (Attach never writes one): nothing in it is
// the attachment's to undo.
var ErrHostNamespace = errors.New("pod shares the host network namespace")

const defaultReturnTimeout = 5 * time.Second

// NewAttacher returns an Attacher for the options.
func NewAttacher(opts Options) *Attacher {
	a := &Attacher{
		ns: opts.Namespaces, kernel: opts.Kernel, clock: opts.Clock, tempPrefix: opts.TempPrefix,
		nodeIPs: opts.NodeIPs, returnTimeout: opts.ReturnTimeout,
		ipoibStandIn: opts.IPoIBStandIn,
	}
	if a.ns == nil {
		a.ns = HostNamespaces("")
	}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.tempPrefix == "" {
		a.tempPrefix = "rdt"
	}
	if a.returnTimeout == 0 {
		a.returnTimeout = defaultReturnTimeout
	}
	return a
}

// run is one Attach or Detach: the open namespaces and the State as last changed.
type run struct {
	a    *Attacher
	ctx  context.Context
	log  klog.Logger
	host Namespace
	pod  Namespace // nil when the pod's namespace is gone (Detach only)
	st   State
	save Journal
	// bestEffort ignores journal errors: Attach's undo runs after one, and every step
	// it takes only shrinks what the last saved State already covers.
	bestEffort bool
}

// commit saves the State before the next step changes the system.
func (r *run) commit() error {
	if err := r.save(r.st); err != nil {
		if r.bestEffort {
			r.log.V(4).Info("Journal save failed during undo, continuing", "err", err)
			return nil
		}
		return fmt.Errorf("save attachment state: %w", err)
	}
	return nil
}

// Attach attaches spec into target's network namespace.
//
// Before every step that changes the system it saves the State through save, so the
// saved State always covers what has been done: after a crash, Detach from the last
// saved State converges to the host as it was (Attach never resumes; attach again after
// that Detach if the pod still needs it).
//
// On failure Attach undoes what it did (best effort) and returns the error with a State
// whose Phase is PhaseDetaching when something may be left behind (keep it and Detach
// later), or empty when nothing is.
func (a *Attacher) Attach(ctx context.Context, spec Spec, target Target, save Journal) (State, error) {
	logger := klog.FromContext(ctx).WithValues("podUID", target.PodUID, "mode", spec.Mode,
		"hostNetdev", spec.HostNetdev, "podIfName", spec.PodIfName)
	ctx = klog.NewContext(ctx, logger)
	spec = spec.withDefaults()
	st := State{Spec: spec, Target: target, Phase: PhaseAttaching}
	if err := spec.Validate(); err != nil {
		return State{}, err
	}
	if spec.Mode == ModeNone && spec.RDMADevice == "" {
		st.Phase = PhaseAttached
		return st, nil
	}
	if (spec.RDMADevice != "" || spec.gidDevice() != "") && a.kernel == nil {
		return State{}, errors.New("spec needs the RDMA kernel (RDMA device or GID lookup) but none is configured")
	}
	start := a.clock.Now()
	host, err := a.ns.Host(ctx)
	if err != nil {
		return State{}, fmt.Errorf("open host network namespace: %w", err)
	}
	defer closeNS(logger, host)
	pod, err := a.ns.Open(ctx, target.NetnsPath)
	if err != nil {
		return State{}, fmt.Errorf("open pod network namespace %s: %w", target.NetnsPath, err)
	}
	defer closeNS(logger, pod)
	if pod.ID() == host.ID() {
		// A host-network pod: "moving" into it would rename the host's own netdev.
		return State{}, fmt.Errorf("pod network namespace %s is the host's: %w", target.NetnsPath, ErrHostNamespace)
	}

	r := &run{a: a, ctx: ctx, log: logger, host: host, pod: pod, st: st, save: save}
	if err := r.checkNodeBoundary(); err != nil {
		return State{}, err // nothing saved or done yet
	}
	err = r.attach()
	if err == nil {
		logger.V(2).Info("Attached", "tempName", r.st.TempName, "addresses", r.st.PodAddresses,
			"gidIndex", r.st.GIDIndex, "rdmaMoved", r.st.RDMAMoved, "duration", a.clock.Since(start))
		return r.st, nil
	}
	if a.noUndo {
		return r.st, err
	}
	logger.Info("Attach failed, undoing", "err", err)
	r.bestEffort = true
	// The undo must run even when the caller's deadline is what made Attach fail.
	r.ctx = context.WithoutCancel(ctx)
	if uerr := r.detach(); uerr != nil {
		logger.Error(uerr, "Undo of a failed attach incomplete, the attachment must be detached later")
		r.st.Phase = PhaseDetaching
		return r.st, errors.Join(err, fmt.Errorf("undo: %w", uerr))
	}
	r.st.Phase = ""
	return r.st, err
}

func (r *run) attach() error {
	if r.st.Spec.PodIfName != "" {
		if _, err := r.pod.Netlink().LinkByName(r.st.Spec.PodIfName); err == nil {
			return fmt.Errorf("attach %s: %w: %s", r.st.Spec.HostNetdev, ErrNameTaken, r.st.Spec.PodIfName)
		} else if !isNotFound(err) {
			return fmt.Errorf("look up %s in the pod: %w", r.st.Spec.PodIfName, err)
		}
	}
	var err error
	switch r.st.Spec.Mode {
	case ModeMacvlan, ModeIPVlan, ModeIPoIB:
		err = r.attachChild()
	case ModeMove:
		err = r.attachMove()
	}
	if err != nil {
		return err
	}
	if dev := r.st.Spec.RDMADevice; dev != "" {
		r.st.RDMAMoved = true
		if err := r.commit(); err != nil {
			return err
		}
		if err := r.a.kernel.MoveDevice(r.ctx, dev, r.pod.FD()); err != nil {
			return fmt.Errorf("move RDMA device %s into the pod: %w", dev, err)
		}
	}
	r.st.Phase = PhaseAttached
	return r.commit()
}

// Detach undoes st: it removes what Attach created in the pod and gives back what it
// moved, restoring the host netdev's name, MTU, addresses, routes and up state. It is
// idempotent and works from any Phase, also when the pod's namespace is gone. It saves
// the State (PhaseDetaching) before changing anything; after it returns nil the caller
// forgets the State. It refuses (ErrHostNamespace) a State whose pod namespace is the
// host's, before it changes anything.
func (a *Attacher) Detach(ctx context.Context, st State, save Journal) error {
	logger := klog.FromContext(ctx).WithValues("podUID", st.Target.PodUID, "mode", st.Spec.Mode,
		"hostNetdev", st.Spec.HostNetdev, "podIfName", st.Spec.PodIfName)
	ctx = klog.NewContext(ctx, logger)
	if (st.Spec.Mode == ModeNone || st.Spec.Mode == "") && !st.RDMAMoved {
		return nil
	}
	start := a.clock.Now()
	host, err := a.ns.Host(ctx)
	if err != nil {
		return fmt.Errorf("open host network namespace: %w", err)
	}
	defer closeNS(logger, host)
	r := &run{a: a, ctx: ctx, log: logger, host: host, st: st, save: save}
	if err := r.detach(); err != nil {
		return err
	}
	logger.V(2).Info("Detached", "duration", a.clock.Since(start))
	return nil
}

// detach opens the pod's namespace if it still exists and undoes everything st covers.
func (r *run) detach() error {
	r.st.Phase = PhaseDetaching
	if err := r.commit(); err != nil {
		return err
	}
	if r.pod == nil {
		pod, err := r.a.ns.Open(r.ctx, r.st.Target.NetnsPath)
		switch {
		case errors.Is(err, ErrNamespaceGone):
			r.log.V(2).Info("Pod network namespace is gone", "netns", r.st.Target.NetnsPath)
		case err != nil:
			return fmt.Errorf("open pod network namespace %s: %w", r.st.Target.NetnsPath, err)
		default:
			defer closeNS(r.log, pod)
			r.pod = pod
		}
	}
	if r.pod != nil && r.pod.ID() == r.host.ID() {
		// Attach refuses such a namespace, so the State is damaged or foreign: "undoing"
		// it would take the host's own netdevs down, rename, delete or move them.
		return fmt.Errorf("refuse to detach: pod network namespace %s is the host's: %w", r.st.Target.NetnsPath, ErrHostNamespace)
	}
	if r.st.RDMAMoved {
		podFD := -1
		if r.pod != nil {
			podFD = r.pod.FD()
		}
		if err := r.a.kernel.ReturnDevice(r.ctx, r.st.Spec.RDMADevice, podFD, r.host.FD()); err != nil {
			return fmt.Errorf("return RDMA device %s to the host: %w", r.st.Spec.RDMADevice, err)
		}
		r.st.RDMAMoved = false
		if err := r.commit(); err != nil {
			return err
		}
	}
	switch r.st.Spec.Mode {
	case ModeMacvlan, ModeIPVlan, ModeIPoIB:
		if err := r.detachChild(); err != nil {
			return err
		}
		return r.forgetPodAddresses()
	case ModeMove:
		if err := r.forgetPodAddresses(); err != nil {
			return err
		}
		return r.detachMove()
	}
	return nil
}

// forgetPodAddresses tells the RDMA kernel model that the pod's addresses are gone (the
// child died or the netdev left the pod, which flushes its addresses).
func (r *run) forgetPodAddresses() error {
	dev := r.st.Spec.gidDevice()
	if dev == "" {
		return nil
	}
	for _, p := range r.st.PodAddresses {
		if err := r.a.kernel.AddressRemoved(r.ctx, dev, r.st.Spec.IBPort, r.st.Spec.PodIfName, p.Addr()); err != nil {
			return fmt.Errorf("remove GID of %s: %w", p.Addr(), err)
		}
	}
	return nil
}

// configurePod gives the pod interface link its addresses, brings it up, adds the
// routes and finds the GID index of its address.
func (r *run) configurePod(link netlink.Link, addrs []netip.Prefix, routes []Route) error {
	nl := r.pod.Netlink()
	r.st.PodAddresses = addrs
	if err := r.commit(); err != nil {
		return err
	}
	dev := r.st.Spec.gidDevice()
	for _, p := range addrs {
		if err := addAddr(nl, link, p); err != nil {
			return fmt.Errorf("add address %s to %s in the pod: %w", p, link.Attrs().Name, err)
		}
		if dev != "" {
			if err := r.a.kernel.AddressAdded(r.ctx, dev, r.st.Spec.IBPort, r.st.Spec.PodIfName, p.Addr()); err != nil {
				return fmt.Errorf("add GID of %s: %w", p.Addr(), err)
			}
		}
	}
	if err := nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("set %s up in the pod: %w", link.Attrs().Name, err)
	}
	for _, rt := range routes {
		if err := nl.RouteAdd(podRoute(link, rt)); err != nil && !isExist(err) {
			return fmt.Errorf("add route %s in the pod: %w", rt.Dst, err)
		}
	}
	if addr, ok := gidAddress(addrs); ok && dev != "" {
		idx, err := r.a.kernel.FindGID(r.ctx, dev, r.st.Spec.IBPort, r.st.Spec.PodIfName, addr)
		if err != nil {
			return fmt.Errorf("find the GID of %s on %s port %d: %w", addr, dev, r.st.Spec.IBPort, err)
		}
		r.st.GIDIndex = &idx
	}
	return nil
}

// gidAddress is the address whose GID the pod uses: the first IPv4, else the first
// global IPv6 one (the layout's GID index rule).
func gidAddress(addrs []netip.Prefix) (netip.Addr, bool) {
	for _, p := range addrs {
		if p.Addr().Is4() {
			return p.Addr(), true
		}
	}
	for _, p := range addrs {
		if a := p.Addr(); a.Is6() && a.IsGlobalUnicast() {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func closeNS(logger klog.Logger, ns Namespace) {
	if err := ns.Close(); err != nil {
		logger.V(4).Info("Close network namespace", "err", err)
	}
}

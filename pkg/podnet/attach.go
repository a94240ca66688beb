package podnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// AttachPod attaches every device of the claims reserved for pod that is not attached
// yet. netnsPath is the pod's network namespace; empty for a pod on the host network,
// which needs (and gets) nothing but the RDMA device in exclusive netns mode.
func (p *Network) AttachPod(ctx context.Context, pod, podName, netnsPath string) error {
	logger := klog.FromContext(ctx).WithValues("podUID", pod, "pod", podName)
	ctx = klog.NewContext(ctx, logger)
	work, release, err := p.lockPodClaims(ctx, pod)
	if err != nil || len(work) == 0 {
		return err
	}
	defer release()
	var errs []error
	attached, ok, failed := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, w := range work {
		done, err := p.attachOne(ctx, w, pod, netnsPath)
		switch {
		case errors.Is(err, errClaimGone):
			failed[w.claimUID] = true
		case err != nil:
			errs = append(errs, fmt.Errorf("claim %s: %w", w.claim, err))
			failed[w.claimUID] = true
		case done:
			attached[w.claimUID] = true
			ok[w.claimUID] = true
		default:
			ok[w.claimUID] = true
		}
	}
	for _, uid := range slices.Sorted(maps.Keys(attached)) {
		p.changed(ctx, uid, Attached)
	}
	// Ready and the mark also for attachments made before (a plugin that stopped between
	// the attachment and these writes): both are local file writes.
	for _, uid := range slices.Sorted(maps.Keys(ok)) {
		if failed[uid] {
			continue
		}
		p.changed(ctx, uid, Ready)
		if p.markDir != "" {
			// Containers of the pod may start now (the CDI spec's hook waits for this).
			if err := attachmark.Mark(p.markDir, pod, uid); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// attachOne attaches one device into pod unless that is done; it reports whether it
// attached something now.
func (p *Network) attachOne(ctx context.Context, w podWork, pod, netnsPath string) (bool, error) {
	var spec netattach.Spec
	var previous *netattach.State
	skip := false
	err := p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		previous, skip = nil, false
		return withDevice(cp, w, func(n *checkpoint.Network, nd *checkpoint.NetworkDevice) (bool, error) {
			if !n.HasPod(pod) || nd.Stale {
				skip = true
				return false, nil
			}
			if a := nd.Attachment(pod); a != nil {
				if a.State.Phase == netattach.PhaseAttached && a.State.Target.NetnsPath == netnsPath {
					skip = true
					return false, nil
				}
				// An attach or detach interrupted by a crash, or an attachment into an
				// earlier sandbox of the pod (the runtime created the pod's sandbox
				// again, and the old one's namespace is gone or going): undo it first.
				st := a.State
				previous = &st
				return false, nil
			}
			s, err := p.specFor(cp, nd, pod, netnsPath)
			if err != nil {
				return false, err
			}
			spec = s
			// Recording the attachment before anything happens on the node also
			// reserves its addresses (the pool allocator reads every record).
			nd.Attachments = append(nd.Attachments, checkpoint.PodAttachment{Pod: pod, State: netattach.State{
				Spec: s, Target: netattach.Target{PodUID: pod, NetnsPath: netnsPath}, Phase: netattach.PhaseAttaching}})
			return true, nil
		})
	})
	if err != nil || skip {
		return false, err
	}
	if previous != nil {
		klog.FromContext(ctx).Info("Undoing an interrupted attachment, or one into an earlier sandbox of the pod, before attaching again",
			"claim", w.claim, "phase", previous.Phase, "netns", previous.Target.NetnsPath)
		if err := p.detachState(ctx, w, pod, *previous); err != nil {
			return false, err
		}
		return p.attachOne(ctx, w, pod, netnsPath)
	}
	st, err := p.attacher.Attach(ctx, spec, netattach.Target{PodUID: pod, NetnsPath: netnsPath}, p.journal(ctx, w, pod))
	if err != nil {
		if st.Phase == "" {
			// Undone: forget it, which also returns its addresses to the pool.
			if ferr := p.forget(ctx, w, pod); ferr != nil {
				err = errors.Join(err, ferr)
			}
		}
		return false, fmt.Errorf("attach %s of device %s: %w", spec.Mode, p.deviceName(w), err)
	}
	if err := p.journal(ctx, w, pod)(st); err != nil {
		return false, err
	}
	return true, nil
}

// deviceName is the device of w for messages.
func (p *Network) deviceName(w podWork) string {
	return fmt.Sprintf("#%d of claim %s", w.device, w.claim)
}

// specFor builds the attachment of nd into pod, inside a checkpoint change: the pod
// interface's name (configured, or the lowest free rdma<k> of the pod) and addresses
// (static, or the lowest free address of the port's pool).
func (p *Network) specFor(cp *checkpoint.Checkpoint, nd *checkpoint.NetworkDevice, pod, netnsPath string) (netattach.Spec, error) {
	cfg := nd.Config
	mode := netattach.Mode(*cfg.Mode)
	spec := netattach.Spec{
		Mode: mode, HostNetdev: nd.Netdev, IBDevice: nd.IBDev, IBPort: nd.Port,
	}
	if nd.MoveRDMA {
		spec.RDMADevice = nd.IBDev
	}
	if mode == "" || mode == netattach.ModeNone {
		spec.Mode = netattach.ModeNone
		if netnsPath == "" {
			// A pod on the host network already sees the host's RDMA devices.
			spec.RDMADevice = ""
		}
		return spec, nil
	}
	if netnsPath == "" {
		return spec, errors.New("the pod uses the host network: there is no pod network namespace to attach to (drop hostNetwork, or set network.mode none)")
	}
	names, used := podInterfaces(cp, pod)
	switch {
	case cfg.InterfaceName != nil:
		if names[*cfg.InterfaceName] {
			return spec, fmt.Errorf("interface name %s is already taken in the pod by another device: give each device its own network.interfaceName", *cfg.InterfaceName)
		}
		spec.PodIfName = *cfg.InterfaceName
	default:
		for k := 0; ; k++ {
			if name := defaultPodIfName(p.driverName, k); !names[name] {
				spec.PodIfName = name
				break
			}
		}
	}
	if cfg.MTU != nil {
		spec.MTU = int(*cfg.MTU)
	}
	if cfg.KeepHostAddress != nil {
		spec.KeepHostAddress = *cfg.KeepHostAddress && mode == netattach.ModeMove
	}
	if cfg.PKey != nil {
		v, err := v1alpha1.ParsePKey(*cfg.PKey)
		if err != nil {
			return spec, fmt.Errorf("pkey: %w", err)
		}
		spec.PKey = v
	}
	for _, r := range cfg.Routes {
		dst, err := v1alpha1.ParseRouteDestination(r.Destination)
		if err != nil {
			return spec, fmt.Errorf("route %s: %w", r.Destination, err)
		}
		route := netattach.Route{Dst: dst}
		if r.Gateway != "" {
			gw, err := netip.ParseAddr(r.Gateway)
			if err != nil {
				return spec, fmt.Errorf("route gateway %s: %w", r.Gateway, err)
			}
			route.Gateway = gw
		}
		spec.Routes = append(spec.Routes, route)
	}
	switch {
	case len(cfg.Addresses) > 0:
		addrs, err := staticPrefixes(cfg.Addresses)
		if err != nil {
			return spec, err
		}
		for _, a := range addrs {
			if used[a.Addr()] != "" {
				return spec, fmt.Errorf("static address %s is already used by %s on this node", a, used[a.Addr()])
			}
		}
		spec.Addresses = addrs
	case cfg.IPAM != nil && *cfg.IPAM == v1alpha1.IPAMNode:
		r, ok := addressPool(nd, p.pools, p.nodeName, p.portOf(nd))
		if !ok {
			return spec, fmt.Errorf("ipam: node, but no address pool of the node configuration selects %s port %d", nd.IBDev, nd.Port)
		}
		inUse := make(map[netip.Addr]bool, len(used))
		for a := range used {
			inUse[a] = true
		}
		addr, err := p.allocate(r, inUse)
		if err != nil {
			return spec, err
		}
		spec.Addresses = []netip.Prefix{addr}
	}
	return spec, nil
}

// portOf returns the published port of a device for the pool selectors, or what the
// record knows of it when the device is no longer published.
func (p *Network) portOf(nd *checkpoint.NetworkDevice) *discovery.Port {
	if dev, ok := p.devices.Lookup(nd.Pool, nd.Device); ok {
		port := dev.Port
		return &port
	}
	return &discovery.Port{IBDev: nd.IBDev, Port: nd.Port, LinkLayer: nd.LinkLayer, Netdev: nd.Netdev}
}

// podInterfaces returns the interface names recorded for pod and every address
// recorded on the node, with the attachment that holds it.
func podInterfaces(cp *checkpoint.Checkpoint, pod string) (map[string]bool, map[netip.Addr]string) {
	names := map[string]bool{}
	used := map[netip.Addr]string{}
	for entry, n := range networks(cp) {
		for _, nd := range n.Devices {
			for _, a := range nd.Attachments {
				if a.Pod == pod && a.State.Spec.PodIfName != "" {
					names[a.State.Spec.PodIfName] = true
				}
				owner := fmt.Sprintf("claim %s/%s (pod %s)", entry.Namespace, entry.Name, a.Pod)
				for _, pfx := range a.State.Spec.Addresses {
					used[pfx.Addr()] = owner
				}
				for _, pfx := range a.State.PodAddresses {
					used[pfx.Addr()] = owner
				}
			}
		}
	}
	return names, used
}

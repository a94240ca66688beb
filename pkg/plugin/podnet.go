package plugin

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Attacher is what podNetwork needs of *netattach.Attacher.
type Attacher interface {
	Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error)
	Detach(ctx context.Context, st netattach.State, save netattach.Journal) error
}

// podNetwork attaches the networks of prepared claims into their pods' network
// namespaces when the container runtime creates the pod sandbox, and detaches them when
// it stops or removes the sandbox (nri.go relays the runtime's events). All state is in
// the claims' checkpoint entries (network.go), changed under the claims' locks, so that
// a second plugin instance of a rolling update, a restart or a crash at any step
// converges: an attachment is journaled before every step that changes the node.
type podNetwork struct {
	d        *Driver
	attacher Attacher
	// pools are the node configuration's address pools (ipam: node).
	pools *nodeconfig.Config
	// socket is the NRI socket, for messages.
	socket string
	// markDir keeps the attachment marks the CDI specs' hook waits for (pkg/attachmark);
	// empty keeps none.
	markDir string
	// addresses reserves static addresses cluster-wide; nil refuses them.
	addresses *addrlease.Reserver

	mu        sync.Mutex
	connected bool
	lastErr   error
}

// ready returns nil while the plugin is connected to the runtime's NRI, else why not.
func (p *podNetwork) ready() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.connected {
		return nil
	}
	msg := fmt.Sprintf("the plugin is not connected to the container runtime's NRI socket %s (is NRI enabled in containerd or CRI-O? see docs/network-attachment.md)", p.socket)
	if p.lastErr != nil {
		return fmt.Errorf("%s: %w", msg, p.lastErr)
	}
	return errors.New(msg)
}

func (p *podNetwork) setConnected(ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connected, p.lastErr = ok, err
}

// netUnavailable says why the driver has no network attachment at all.
func (d *Driver) netUnavailable() string {
	if d.netOffReason != "" {
		return d.netOffReason
	}
	return "the plugin runs with --network-attachment=false"
}

// podWork is one device of one claim to attach into or detach from a pod.
type podWork struct {
	claimUID string
	claim    string // namespace/name, for messages
	device   int    // index in claimNetwork.Devices
}

// claimsOfPod returns, sorted by namespace/name, the claims whose network record names
// pod (reserved) or holds an attachment into pod (attached).
func (p *podNetwork) claimsOfPod(ctx context.Context, pod string) ([]podWork, error) {
	var work []podWork
	err := p.d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
		work = work[:0]
		for entry, n := range networks(cp) {
			for i := range n.Devices {
				if n.HasPod(pod) || n.Devices[i].Attachment(pod) != nil {
					work = append(work, podWork{claimUID: entry.UID, claim: entry.Namespace + "/" + entry.Name, device: i})
				}
			}
		}
		return false, nil
	})
	slices.SortFunc(work, func(a, b podWork) int {
		if c := strings.Compare(a.claim, b.claim); c != 0 {
			return c
		}
		return a.device - b.device
	})
	return work, err
}

// lockPodClaims finds the claims of pod (claimsOfPod) and takes their locks; with no
// claims it returns no work and holds nothing.
func (p *podNetwork) lockPodClaims(ctx context.Context, pod string) ([]podWork, *heldClaims, error) {
	work, err := p.claimsOfPod(ctx, pod)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", errCheckpointUnreadable, err)
	}
	if len(work) == 0 {
		return nil, nil, nil
	}
	var uids []string
	for _, w := range work {
		if !slices.Contains(uids, w.claimUID) {
			uids = append(uids, w.claimUID)
		}
	}
	held, err := p.d.claims.lock(ctx, uids)
	if err != nil {
		return nil, nil, fmt.Errorf("lock claims: %w", err)
	}
	return work, held, nil
}

// errClaimGone is returned when a claim's entry went away while it was worked on.
var errClaimGone = errors.New("claim is no longer prepared on this node")

// withDevice applies fn to one device's network record inside a checkpoint change and
// saves the record when fn reports a change.
func withDevice(cp *checkpoint.Checkpoint, w podWork, fn func(n *checkpoint.Network, nd *checkpoint.NetworkDevice) (bool, error)) (bool, error) {
	entry := cp.Claims[w.claimUID]
	// fn works on a copy, which replaces the record only when fn changed it: a change
	// that fails must leave the checkpoint as it was.
	n := networkOf(entry).DeepCopy()
	if n == nil || w.device >= len(n.Devices) {
		return false, errClaimGone
	}
	changed, err := fn(n, &n.Devices[w.device])
	if err != nil || !changed {
		return false, err
	}
	entry.SetNetwork(n)
	return true, nil
}

// journal saves an attachment's state in the checkpoint before the attacher acts.
func (p *podNetwork) journal(ctx context.Context, w podWork, pod string) netattach.Journal {
	return func(st netattach.State) error {
		return p.d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
			return withDevice(cp, w, func(_ *checkpoint.Network, nd *checkpoint.NetworkDevice) (bool, error) {
				a := nd.Attachment(pod)
				if a == nil {
					nd.Attachments = append(nd.Attachments, checkpoint.PodAttachment{Pod: pod})
					a = &nd.Attachments[len(nd.Attachments)-1]
				}
				a.State = st
				return true, nil
			})
		})
	}
}

// attachPod attaches every device of the claims reserved for pod that is not attached
// yet. netnsPath is the pod's network namespace; empty for a pod on the host network,
// which needs (and gets) nothing but the RDMA device in exclusive netns mode.
func (p *podNetwork) attachPod(ctx context.Context, pod, podName, netnsPath string) error {
	logger := klog.FromContext(ctx).WithValues("podUID", pod, "pod", podName)
	ctx = klog.NewContext(ctx, logger)
	work, held, err := p.lockPodClaims(ctx, pod)
	if err != nil || len(work) == 0 {
		return err
	}
	defer held.release(nil)
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
	for uid := range attached {
		p.d.reportNetwork(ctx, uid)
	}
	// The metadata file and the mark also for attachments made before (a plugin that
	// stopped between the attachment and these writes): both are local file writes.
	for _, uid := range sortedKeys(ok) {
		if failed[uid] {
			continue
		}
		p.d.updateMetadata(ctx, uid)
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
func (p *podNetwork) attachOne(ctx context.Context, w podWork, pod, netnsPath string) (bool, error) {
	var spec netattach.Spec
	var previous *netattach.State
	skip := false
	err := p.d.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
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
func (p *podNetwork) deviceName(w podWork) string {
	return fmt.Sprintf("#%d of claim %s", w.device, w.claim)
}

// specFor builds the attachment of nd into pod, inside a checkpoint change: the pod
// interface's name (configured, or the lowest free rdma<k> of the pod) and addresses
// (static, or the lowest free address of the port's pool).
func (p *podNetwork) specFor(cp *checkpoint.Checkpoint, nd *checkpoint.NetworkDevice, pod, netnsPath string) (netattach.Spec, error) {
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
			if name := defaultPodIfName(p.d.driverName, k); !names[name] {
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
		r, ok := addressPool(nd, p.pools, p.d.nodeName, p.portOf(nd))
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
func (p *podNetwork) portOf(nd *checkpoint.NetworkDevice) *discovery.Port {
	if dev, ok := p.d.devices.Lookup(nd.Pool, nd.Device); ok {
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

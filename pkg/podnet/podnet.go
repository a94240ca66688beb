// Package podnet attaches the networks of prepared claims into their pods: the NRI
// plugin that relays the container runtime's pod and container events (nri.go), the
// attach and detach of each claimed device into each pod, journaled in the claims'
// checkpoint records (checkpoint.Network) before every step that changes the node, the
// pod interfaces' names and addresses (names.go, ipam.go), and the node guard around
// the attacher (nodeguard.go).
//
// The kubelet plugin (pkg/plugin) owns the checkpoint and the claims' locks and gives
// them to this package through [Options]; it never calls into pkg/plugin.
package podnet

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/attachmark"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// Attacher is what Network needs of *netattach.Attacher.
type Attacher interface {
	Attach(ctx context.Context, spec netattach.Spec, target netattach.Target, save netattach.Journal) (netattach.State, error)
	Detach(ctx context.Context, st netattach.State, save netattach.Journal) error
}

// DeviceLookup finds a device the node publishes; *publish.Publisher implements it.
type DeviceLookup interface {
	Lookup(pool, device string) (devicemodel.Device, bool)
}

// SpecLister lists the claims that have a CDI spec on the node; *cdi.Writer implements it.
type SpecLister interface {
	List() ([]string, error)
}

// Options are what a Network is given by the kubelet plugin.
type Options struct {
	// Attacher makes and undoes attachments: the node guard (NewNodeGuard) around a
	// *netattach.Attacher.
	Attacher Attacher
	// Pools holds the node configuration's address pools.
	Pools *nodeconfig.Config
	// Socket is the runtime's NRI socket.
	Socket string
	// MarkDir is where the attachment marks are kept (pkg/attachmark), which the CDI
	// specs' hook waits for; empty keeps none.
	MarkDir string
	// Addresses reserves static pod addresses cluster-wide (pkg/addrlease); nil refuses
	// static addresses, since no other node would know them.
	Addresses *addrlease.Reserver
	// DriverName and NodeName are the driver's and the node's names.
	DriverName, NodeName string
	// Update changes the checkpoint (checkpoint.Store.Update, with the plugin's error
	// accounting); the claims' network records live there.
	Update func(ctx context.Context, fn checkpoint.Change) error
	// LockClaims takes the locks of the claims uids, the ones prepare and unprepare take,
	// and returns the function that releases them.
	LockClaims func(ctx context.Context, uids []string) (release func(), err error)
	// Changed is told when a claim's attachments into a pod changed (see [Change]); it is
	// the one way back into the plugin (claim status, device metadata). Nil tells nobody.
	Changed func(ctx context.Context, claimUID string, change Change)
	// Devices finds published devices, for the address pools' port selectors.
	Devices DeviceLookup
	// Specs lists the node's CDI specs of the driver, and Kube reads claims: both tell,
	// without the checkpoint, whether a pod has something of the driver (nri_failopen.go).
	Specs SpecLister
	Kube  kubernetes.Interface
	// Metrics receives the attach latency; nil creates a private set.
	Metrics *metrics.Plugin
}

// Change is what happened to a claim's attachments into a pod.
type Change int

const (
	// Attached means an attach of a pod made an attachment of the claim now, so what
	// the pod got (the claim's status) changed. Told once per claim and attach, even
	// when another device of the claim failed.
	Attached Change = iota + 1
	// Ready means every device of the claim is attached into the pod, now or before (a
	// plugin may have stopped between the attachment and what follows it). Told after
	// Attached, and before the pod's attachment mark lets its containers start.
	Ready
)

// Network attaches the networks of prepared claims into their pods' network
// namespaces when the container runtime creates the pod sandbox, and detaches them when
// it stops or removes the sandbox (nri.go relays the runtime's events). All state is in
// the claims' checkpoint entries (checkpoint.Network), changed under the claims' locks,
// so that a second plugin instance of a rolling update, a restart or a crash at any step
// converges: an attachment is journaled before every step that changes the node.
type Network struct {
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

	driverName, nodeName string
	update               func(context.Context, checkpoint.Change) error
	lockClaims           func(context.Context, []string) (func(), error)
	changed              func(ctx context.Context, claimUID string, change Change)
	devices              DeviceLookup
	specs                SpecLister
	kube                 kubernetes.Interface
	metrics              *metrics.Plugin

	mu        sync.Mutex
	connected bool
	lastErr   error
}

// New returns the pod network of opts.
func New(opts Options) *Network {
	p := &Network{
		attacher: opts.Attacher, pools: opts.Pools, socket: opts.Socket, markDir: opts.MarkDir, addresses: opts.Addresses,
		driverName: opts.DriverName, nodeName: opts.NodeName, update: opts.Update, lockClaims: opts.LockClaims,
		changed: opts.Changed, devices: opts.Devices, specs: opts.Specs, kube: opts.Kube, metrics: opts.Metrics,
	}
	if p.metrics == nil {
		p.metrics = metrics.NewPlugin()
	}
	if p.changed == nil {
		p.changed = func(context.Context, string, Change) {}
	}
	return p
}

// Ready returns nil while the plugin is connected to the runtime's NRI, else why not.
func (p *Network) Ready() error {
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

// SetConnected records whether the plugin is connected to the runtime's NRI, and why
// not: RunNRI does, for each connection; a caller that relays the runtime's events by
// other means (NewNRIPlugin) does it itself.
func (p *Network) SetConnected(ok bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.connected, p.lastErr = ok, err
}

// podWork is one device of one claim to attach into or detach from a pod.
type podWork struct {
	claimUID string
	claim    string // namespace/name, for messages
	device   int    // index in claimNetwork.Devices
}

// claimsOfPod returns, sorted by namespace/name, the claims whose network record names
// pod (reserved) or holds an attachment into pod (attached).
func (p *Network) claimsOfPod(ctx context.Context, pod string) ([]podWork, error) {
	var work []podWork
	err := p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
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
func (p *Network) lockPodClaims(ctx context.Context, pod string) ([]podWork, func(), error) {
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
	release, err := p.lockClaims(ctx, uids)
	if err != nil {
		return nil, nil, fmt.Errorf("lock claims: %w", err)
	}
	return work, release, nil
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
func (p *Network) journal(ctx context.Context, w podWork, pod string) netattach.Journal {
	return func(st netattach.State) error {
		return p.update(ctx, func(cp *checkpoint.Checkpoint) (bool, error) {
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

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
	"slices"
	"strings"
	"sync"

	"k8s.io/client-go/kubernetes"

	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
	"github.com/rdma-dra/rdma-dra-driver/pkg/checkpoint"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
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

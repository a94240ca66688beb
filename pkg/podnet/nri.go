package podnet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// DefaultNRISocket is where containerd and CRI-O serve NRI by default.
const DefaultNRISocket = "/var/run/nri/nri.sock"

// nriPluginIndex orders the plugin among the runtime's NRI plugins: network plugins
// (such as a CNI-like attacher) are conventionally early; the index only matters for
// adjustments, and this plugin adjusts nothing another plugin sets.
const nriPluginIndex = "40"

// nriHealthyAfter is how long a connection to the runtime's NRI must have been up for
// the next reconnect to start over at the shortest delay: a runtime that restarts now
// and then is reconnected to at once, one that drops the plugin right after every
// connect ever more slowly.
const nriHealthyAfter = time.Minute

// NRIPlugin relays the container runtime's pod and container events to Network: it is
// the plugin object of an NRI stub (github.com/containerd/nri/pkg/stub), which RunNRI
// makes for each connection.
type NRIPlugin struct {
	net *Network
	log klog.Logger
	// base is the context of work that goes on after its request was answered
	// (nri_bound.go): the plugin's, which ends with the process; nil takes the
	// request's without its cancellation.
	base context.Context
	// timeout is the runtime's request timeout in nanoseconds, once it configured the
	// plugin; zero until then.
	timeout atomic.Int64
}

// NewNRIPlugin returns the NRI plugin of p, which logs through log and does the work of
// answered requests (nri_bound.go) in a context without the request's cancellation.
func NewNRIPlugin(p *Network, log klog.Logger) *NRIPlugin {
	return &NRIPlugin{net: p, log: log}
}

// RunNRI connects to the runtime's NRI socket and serves events until ctx ends,
// reconnecting with backoff when the runtime restarts or the socket is not there yet.
// While it is not connected, claims that need network attachment fail at prepare with
// the reason (Network.ready).
func (p *Network) RunNRI(ctx context.Context, name string) {
	p.runNRI(ctx, name, p.serveNRI)
}

// runNRI is RunNRI with serve for one connection, which returns how long it was up.
func (p *Network) runNRI(ctx context.Context, name string, serve func(context.Context, string) (time.Duration, error)) {
	logger := klog.FromContext(ctx).WithName("nri")
	ctx = klog.NewContext(ctx, logger)
	newBackoff := func() wait.Backoff {
		return wait.Backoff{Duration: time.Second, Factor: 2, Cap: 30 * time.Second, Steps: 1 << 30}
	}
	backoff := newBackoff()
	for ctx.Err() == nil {
		up, err := serve(ctx, name)
		p.SetConnected(false, err)
		if ctx.Err() != nil {
			return
		}
		if up >= nriHealthyAfter {
			backoff = newBackoff()
		}
		d := backoff.Step()
		logger.Info("Not connected to the runtime's NRI, retrying", "socket", p.socket, "err", err, "retryIn", d)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// serveNRI serves one connection to the runtime's NRI, logging through ctx's logger,
// and returns how long it was connected.
func (p *Network) serveNRI(ctx context.Context, name string) (time.Duration, error) {
	logger := klog.FromContext(ctx)
	if _, err := os.Stat(p.socket); err != nil {
		return 0, fmt.Errorf("NRI socket: %w", err)
	}
	plugin := &NRIPlugin{net: p, log: logger, base: ctx}
	closed := make(chan struct{})
	s, err := stub.New(plugin,
		stub.WithPluginName(name),
		stub.WithPluginIdx(nriPluginIndex),
		stub.WithSocketPath(p.socket),
		stub.WithOnClose(func() { close(closed) }),
	)
	if err != nil {
		return 0, fmt.Errorf("create NRI stub: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return 0, fmt.Errorf("connect to NRI: %w", err)
	}
	defer s.Stop()
	// Start returns once the runtime configured the plugin, with its request timeout.
	plugin.timeout.Store(int64(s.RequestTimeout()))
	connected := time.Now()
	p.SetConnected(true, nil)
	logger.Info("Connected to the runtime's NRI", "socket", p.socket, "runtimeNRIVersion", s.RuntimeNRIVersion(), "requestTimeout", s.RequestTimeout())
	select {
	case <-ctx.Done():
		return time.Since(connected), ctx.Err()
	case <-closed:
		return time.Since(connected), errors.New("the runtime closed the NRI connection")
	}
}

// Synchronize brings the attachments in line with the pods the runtime has: attached
// into pods that are gone are undone (the namespace died with them; a moved netdev
// comes back to the host), and pods that run without their attachment (the plugin was
// down when the sandbox was created) get it now. That is work for every pod of the
// node, with nothing to answer the runtime: it goes on in the background, so that the
// runtime's request timeout never cuts the connection it is made on.
func (n *NRIPlugin) Synchronize(ctx context.Context, pods []*api.PodSandbox, _ []*api.Container) ([]*api.ContainerUpdate, error) {
	ctx = n.workContext(klog.NewContext(ctx, n.log))
	running := map[string]*api.PodSandbox{}
	for _, pod := range pods {
		running[pod.GetUid()] = pod
	}
	go n.synchronize(ctx, running)
	return nil, nil
}

// synchronize is Synchronize's work, over the running pods by UID.
func (n *NRIPlugin) synchronize(ctx context.Context, running map[string]*api.PodSandbox) {
	known, err := n.net.attachedPods(ctx)
	if err != nil {
		n.log.Error(err, "Synchronize: read attachments")
		return
	}
	for _, uid := range known {
		if running[uid] == nil {
			if err := n.net.DetachPod(ctx, uid); err != nil {
				n.log.Error(err, "Synchronize: detach from a pod that is gone", "podUID", uid)
			}
		}
	}
	uids := make([]string, 0, len(running))
	for uid := range running {
		uids = append(uids, uid)
	}
	sort.Strings(uids)
	for _, uid := range uids {
		pod := running[uid]
		if err := n.net.AttachPod(ctx, uid, podName(pod), netnsOf(pod)); err != nil {
			n.log.Error(err, "Synchronize: attach to a running pod", "podUID", uid, "pod", podName(pod))
		}
	}
}

// RunPodSandbox attaches the pod's claimed networks. An error fails the sandbox, and
// the kubelet creates it again.
func (n *NRIPlugin) RunPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	ctx = klog.NewContext(ctx, n.log)
	start := time.Now()
	err := n.bounded(ctx, "attach", func(ctx context.Context) error {
		err := n.net.AttachPod(ctx, pod.GetUid(), podName(pod), netnsOf(pod))
		return n.net.unlessNotOurs(ctx, pod, nil, err)
	})
	n.net.metrics.ObserveAttach(err, time.Since(start))
	if err != nil {
		n.log.Error(err, "Network attachment failed", "pod", podName(pod), "podUID", pod.GetUid())
	}
	return err
}

// CreateContainer injects the GID index of the pod's own address. If the pod should
// have an attachment that is not there (the plugin was down at RunPodSandbox), it is
// made now: the container has not started yet.
func (n *NRIPlugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	ctx = klog.NewContext(ctx, n.log)
	var env map[string]string
	err := n.bounded(ctx, "attach at container creation", func(ctx context.Context) error {
		var err error
		env, err = n.containerEnv(ctx, pod, ctr)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if len(env) == 0 {
		return nil, nil, nil
	}
	adjust := &api.ContainerAdjustment{}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		adjust.AddEnv(k, env[k])
	}
	n.log.V(2).Info("Container environment from network attachment", "pod", podName(pod), "container", ctr.GetName(), "env", env)
	return adjust, nil, nil
}

// containerEnv is the environment of the container ctr of pod, attaching first what
// the pod should have and does not.
func (n *NRIPlugin) containerEnv(ctx context.Context, pod *api.PodSandbox, ctr *api.Container) (map[string]string, error) {
	// The container's RDMA device nodes tell which claims it uses. Where the runtime
	// shows none (CDI devices applied after NRI), every attachment of the pod counts.
	var devices []string
	for _, d := range ctr.GetLinux().GetDevices() {
		if strings.HasPrefix(d.GetPath(), "/dev/infiniband/") {
			devices = append(devices, d.GetPath())
		}
	}
	env, err := n.net.sandboxEnv(ctx, pod.GetUid(), netnsOf(pod), devices)
	if errors.Is(err, errAttachmentMissing) {
		n.log.Info("Attaching at container creation: the pod sandbox was created without its attachment", "pod", podName(pod))
		if err := n.net.AttachPod(ctx, pod.GetUid(), podName(pod), netnsOf(pod)); err != nil {
			return nil, n.net.unlessNotOurs(ctx, pod, ctr, err)
		}
		env, err = n.net.sandboxEnv(ctx, pod.GetUid(), netnsOf(pod), devices)
	}
	if err != nil {
		return nil, n.net.unlessNotOurs(ctx, pod, ctr, err)
	}
	return env, nil
}

// StopPodSandbox detaches while the pod's namespace still exists, so that a moved
// netdev returns with everything it had. Only the attachments into this sandbox go: the
// kubelet stops and removes an old sandbox of the pod after its new one runs.
func (n *NRIPlugin) StopPodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	ctx = klog.NewContext(ctx, n.log)
	err := n.bounded(ctx, "detach", func(ctx context.Context) error {
		return n.net.detachSandbox(ctx, pod.GetUid(), netnsOf(pod))
	})
	if err != nil {
		n.log.Error(err, "Network detachment failed", "pod", podName(pod))
		return err
	}
	return nil
}

// RemovePodSandbox detaches whatever StopPodSandbox could not.
func (n *NRIPlugin) RemovePodSandbox(ctx context.Context, pod *api.PodSandbox) error {
	return n.StopPodSandbox(ctx, pod)
}

// netnsOf returns the path of the pod's network namespace; empty on the host network.
func netnsOf(pod *api.PodSandbox) string {
	for _, ns := range pod.GetLinux().GetNamespaces() {
		if ns.GetType() == "network" {
			return ns.GetPath()
		}
	}
	return ""
}

func podName(pod *api.PodSandbox) string { return pod.GetNamespace() + "/" + pod.GetName() }

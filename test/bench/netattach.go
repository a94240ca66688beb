package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
)

// AttachResult is the network attachment latency of one pod's macvlan: attach and detach
// by pkg/netattach on the real kernel, in private network namespaces.
type AttachResult struct {
	// NotMeasured says why the figure was not measured (not root, or the kernel refused
	// a veth or macvlan); the other fields are then empty.
	NotMeasured string `json:"not_measured,omitempty"`
	Cycles      int    `json:"cycles,omitempty"`
	// Warmup cycles ran before the measured ones and are not counted.
	Warmup       int     `json:"warmup,omitempty"`
	Seconds      float64 `json:"seconds,omitempty"`
	Attach       Summary `json:"attach"`
	Detach       Summary `json:"detach"`
	AttachDetach Summary `json:"attach_detach"`
	// GIDIndex is the RoCE v2 GID index Attach found for the pod's IPv4 address.
	GIDIndex int `json:"gid_index,omitempty"`
	// LoadAverage is the 1-minute load average when the cycles ended.
	LoadAverage float64 `json:"load_average,omitempty"`
}

// The attachment measured: what BenchmarkAttachDetachMacvlan in pkg/netattach attaches.
const (
	attachPort    = "port0" // the "RoCE port" netdev: one end of a veth pair in the private host namespace
	attachPeer    = "peer0" // the other end (the switch side), in the same namespace
	attachProbe   = "probe0"
	attachIBDev   = "mlx5_0" // the sriov profile's PF, whose netdev becomes attachPort
	attachWarmup  = 3
	attachGateway = "192.0.2.254"
)

func attachSpec() netattach.Spec {
	return netattach.Spec{
		Mode: netattach.ModeMacvlan, HostNetdev: attachPort, PodIfName: "net1", MTU: 1500, IBDevice: attachIBDev,
		Addresses: []netip.Prefix{netip.MustParsePrefix("192.0.2.10/24"), netip.MustParsePrefix("2001:db8:1::10/64")},
		Routes:    []netattach.Route{{Dst: netip.MustParsePrefix("198.51.100.0/24"), Gateway: netip.MustParseAddr(attachGateway)}},
	}
}

// euid is os.Geteuid; tests replace it to take the unprivileged path.
var euid = os.Geteuid

// measureAttach measures attach_detach_p50_ms and attach_detach_p99_ms, with the mock
// sysfs tree of the emulated GID table in a new directory below treeBase (a tmpfs in
// Run: sysfs is in memory). Without root, or when the kernel refuses a veth, a macvlan
// or a network namespace, it records why in Details.Attach and leaves the figures
// empty. Everything it creates (two network namespaces, the veth pair in one of them,
// the mock tree) is gone when it returns, also after an error.
func measureAttach(ctx context.Context, sc scale, treeBase string, r *Results) error {
	res, err := runAttach(ctx, treeBase, sc.attachCycles, sc.attachMaxTime)
	if err != nil {
		return err
	}
	r.Details.Attach = res
	if res.NotMeasured != "" {
		klog.FromContext(ctx).Info("Network attach not measured", "reason", res.NotMeasured)
		return nil
	}
	klog.FromContext(ctx).Info("Measured network attach", "cycles", res.Cycles,
		"p50ms", res.AttachDetach.P50, "p99ms", res.AttachDetach.P99)
	r.AttachDetachP50MS, r.AttachDetachP99MS = ptr(res.AttachDetach.P50), ptr(res.AttachDetach.P99)
	return nil
}

// runAttach sets up the namespaces and the mock tree, runs attachWarmup cycles, then
// cycles until there are cycles of them or maxTime has passed (at least one).
func runAttach(ctx context.Context, treeBase string, cycles int, maxTime time.Duration) (res *AttachResult, err error) {
	if euid() != 0 {
		return &AttachResult{NotMeasured: "needs root (network namespaces, veth and macvlan links)"}, nil
	}
	f, notMeasured, err := newAttachFixture(treeBase)
	if err != nil || notMeasured != "" {
		return &AttachResult{NotMeasured: notMeasured}, err
	}
	defer func() { err = errors.Join(err, f.close()) }()

	logger := klog.FromContext(ctx)
	a := netattach.NewAttacher(netattach.Options{Namespaces: netattach.HostNamespaces(f.hostPath), Kernel: f.kernel})
	spec := attachSpec()
	target := netattach.Target{PodUID: "bench-pod", NetnsPath: f.podPath}
	save := func(netattach.State) error { return nil } // the plugin's checkpoint is not measured
	cycles = max(cycles, 1)
	res = &AttachResult{Warmup: attachWarmup}
	var attach, detach, total []time.Duration
	start := time.Now()
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		measured := i >= attachWarmup
		if measured && (len(total) >= cycles || len(total) > 0 && time.Since(start) >= maxTime) {
			break
		}
		if i == attachWarmup {
			start = time.Now()
		}
		t0 := time.Now()
		st, err := a.Attach(ctx, spec, target, save)
		if err != nil {
			if st.Phase != "" {
				// Something may be left behind; deleting the namespaces removes it anyway.
				if derr := a.Detach(ctx, st, save); derr != nil {
					logger.Error(derr, "Detach after a failed attach")
				}
			}
			return nil, fmt.Errorf("attach, cycle %d: %w", i, err)
		}
		t1 := time.Now()
		if err := a.Detach(ctx, st, save); err != nil {
			return nil, fmt.Errorf("detach, cycle %d: %w", i, err)
		}
		t2 := time.Now()
		if st.GIDIndex == nil {
			return nil, fmt.Errorf("cycle %d: attach found no GID index", i)
		}
		res.GIDIndex = *st.GIDIndex
		if measured {
			attach, detach, total = append(attach, t1.Sub(t0)), append(detach, t2.Sub(t1)), append(total, t2.Sub(t0))
		}
	}
	res.Seconds = time.Since(start).Round(time.Millisecond).Seconds()
	res.LoadAverage = LoadAverage()
	res.Cycles = len(total)
	res.Attach, res.Detach, res.AttachDetach = Summarize(attach), Summarize(detach), Summarize(total)
	if err := f.checkClean(); err != nil {
		return nil, err
	}
	return res, nil
}

// attachFixture is a private "host" network namespace with a veth pair whose one end
// is the port (192.0.2.1/24, 2001:db8:1::1/64), a "pod" namespace, and the emulated GID
// table of a mock RoCE port whose netdev is that end. Addresses are from the
// documentation ranges; nothing outside the private namespaces is touched.
type attachFixture struct {
	host, pod         netns.NsHandle
	hostPath, podPath string
	hh, ph            *netlink.Handle
	tree              string
	kernel            *netattach.EmulatedKernel
}

// newAttachFixture builds the fixture, the mock tree in a new directory below
// treeBase. notMeasured is set when the kernel refuses what the fixture needs; then,
// as after an error, nothing is left behind.
func newAttachFixture(treeBase string) (f *attachFixture, notMeasured string, err error) {
	f = &attachFixture{host: -1, pod: -1}
	defer func() {
		if err != nil || notMeasured != "" {
			err = errors.Join(err, f.close())
			f = nil
		}
	}()
	refused := func(what string, err error) (string, error) {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.EAFNOSUPPORT) {
			return fmt.Sprintf("the kernel refused %s: %v", what, err), nil
		}
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if f.host, err = newNetns(); err != nil {
		notMeasured, err = refused("a network namespace", err)
		return f, notMeasured, err
	}
	if f.pod, err = newNetns(); err != nil {
		notMeasured, err = refused("a network namespace", err)
		return f, notMeasured, err
	}
	f.hostPath, f.podPath = nsPath(f.host), nsPath(f.pod)
	if f.hh, err = netlink.NewHandleAt(f.host, unix.NETLINK_ROUTE); err != nil {
		return f, "", fmt.Errorf("netlink in the host namespace: %w", err)
	}
	if f.ph, err = netlink.NewHandleAt(f.pod, unix.NETLINK_ROUTE); err != nil {
		return f, "", fmt.Errorf("netlink in the pod namespace: %w", err)
	}
	if err := f.hh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: attachPort, MTU: 9000}, PeerName: attachPeer}); err != nil {
		notMeasured, err = refused("a veth pair", err)
		return f, notMeasured, err
	}
	port, err := f.hh.LinkByName(attachPort)
	if err != nil {
		return f, "", err
	}
	probe := &netlink.Macvlan{LinkAttrs: netlink.LinkAttrs{Name: attachProbe, ParentIndex: port.Attrs().Index}, Mode: netlink.MACVLAN_MODE_BRIDGE}
	if err := f.hh.LinkAdd(probe); err != nil {
		notMeasured, err = refused("a macvlan link", err)
		return f, notMeasured, err
	}
	if err := f.hh.LinkDel(probe); err != nil {
		return f, "", fmt.Errorf("delete the probe macvlan: %w", err)
	}
	for _, a := range []string{"192.0.2.1/24", "2001:db8:1::1/64"} {
		p := netip.MustParsePrefix(a)
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}, Flags: unix.IFA_F_NODAD}
		if err := f.hh.AddrAdd(port, addr); err != nil {
			return f, "", fmt.Errorf("add %s to %s: %w", a, attachPort, err)
		}
	}
	for _, name := range []string{attachPeer, attachPort} {
		l, err := f.hh.LinkByName(name)
		if err == nil {
			err = f.hh.LinkSetUp(l)
		}
		if err != nil {
			return f, "", fmt.Errorf("set %s up: %w", name, err)
		}
	}

	// The mock RoCE port: the sriov profile's PF with the veth end as its netdev.
	p, err := mocknode.Lookup("sriov")
	if err != nil {
		return f, "", err
	}
	node := p.Node()
	node.PCIFunctions, node.Netdevs, node.RDMADevices = node.PCIFunctions[:1], node.Netdevs[:1], node.RDMADevices[:1]
	if node.RDMADevices[0].Name != attachIBDev {
		return f, "", fmt.Errorf("the sriov profile's first RDMA device is %s, want %s", node.RDMADevices[0].Name, attachIBDev)
	}
	node.Netdevs[0].Name = attachPort
	node.RDMADevices[0].Ports[0].GIDs = mocknode.RoCEGIDs(attachPort, mocknode.LinkLocalGID(0x0ac0ebfffe3b0000), "192.0.2.1", "2001:db8:1::1")
	if f.tree, err = os.MkdirTemp(treeBase, "rdma-dra-bench-netattach-"); err != nil {
		return f, "", fmt.Errorf("create the mock tree's directory: %w", err)
	}
	if err := node.Write(f.tree, mocknode.WriteOptions{}); err != nil {
		return f, "", fmt.Errorf("write the mock node: %w", err)
	}
	f.kernel = netattach.NewEmulatedKernel(filepath.Join(f.tree, mocknode.SysDir))
	f.kernel.GIDTimeout, f.kernel.GIDInterval = time.Second, 2*time.Millisecond
	return f, "", nil
}

// checkClean reports what the cycles left in the namespaces: the pod must be back to
// its loopback, the host to the veth pair.
func (f *attachFixture) checkClean() error {
	for _, ns := range []struct {
		name string
		h    *netlink.Handle
		want []string
	}{{"pod", f.ph, []string{"lo"}}, {"host", f.hh, []string{"lo", attachPeer, attachPort}}} {
		links, err := ns.h.LinkList()
		if err != nil {
			return fmt.Errorf("list links in the %s namespace: %w", ns.name, err)
		}
		var names []string
		for _, l := range links {
			names = append(names, l.Attrs().Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, ns.want) {
			return fmt.Errorf("attach+detach left links in the %s namespace: %v, want %v", ns.name, names, ns.want)
		}
	}
	return nil
}

// close removes everything: the netlink handles and the last references to both
// namespaces (the kernel then deletes them with the veth pair), and the mock tree.
func (f *attachFixture) close() error {
	var errs []error
	for _, h := range []*netlink.Handle{f.hh, f.ph} {
		if h != nil {
			h.Close()
		}
	}
	for _, ns := range []*netns.NsHandle{&f.host, &f.pod} {
		if ns.IsOpen() {
			errs = append(errs, ns.Close())
		}
	}
	if f.tree != "" {
		errs = append(errs, os.RemoveAll(f.tree))
	}
	return errors.Join(errs...)
}

// newNetns creates a network namespace held only by the returned file descriptor:
// closing it deletes the namespace, and a killed run leaves nothing mounted. unshare
// moves the calling thread into the new namespace, so it runs on a locked thread that
// is switched back before it is unlocked. If that fails the thread stays locked and
// the runtime ends it with the goroutine; but not the main thread, which it only
// parks, still in the namespace: hence the switch back rather than relying on that.
func newNetns() (netns.NsHandle, error) {
	type result struct {
		ns  netns.NsHandle
		err error
	}
	c := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			c <- result{-1, fmt.Errorf("open the current network namespace: %w", err)}
			return
		}
		defer func() { _ = orig.Close() }()
		ns, err := netns.New()
		if err != nil {
			runtime.UnlockOSThread() // unshare failed: the thread did not move
			c <- result{-1, err}
			return
		}
		if err := netns.Set(orig); err != nil {
			_ = ns.Close()
			c <- result{-1, fmt.Errorf("return to the original network namespace: %w", err)}
			return
		}
		runtime.UnlockOSThread()
		c <- result{ns, nil}
	}()
	res := <-c
	return res.ns, res.err
}

// nsPath names the namespace of an open descriptor for the Attacher, which opens
// namespaces by path.
func nsPath(ns netns.NsHandle) string {
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), int(ns))
}

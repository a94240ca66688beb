package netattach

// Tests against the real kernel. They run as root on any kernel with veth and macvlan
// (and are skipped elsewhere). Everything happens in network namespaces the test
// creates and deletes: a private "host" namespace holding a veth pair end as the RoCE
// port's netdev, a "peer" namespace holding the other end (the switch side), and a
// "pod" namespace. The host's own interfaces are never touched. Addresses are from the
// documentation ranges 192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24 and 2001:db8::/32.
// The GID table is the emulated one on a mock tree whose port netdev is the veth.

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

const (
	realPort    = "rport0" // the "RoCE port" netdev in the private host namespace
	realPeer    = "rpeer0" // its veth peer, in the peer namespace
	realPrimary = "rprim0" // a netdev with the (private) host's default route
	peerAddr    = "192.0.2.254"
)

// inNetns runs fn on a thread in the namespace at path. The thread is never unlocked,
// so it exits with the goroutine instead of going back to the pool in another namespace.
func inNetns(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		target, err := netns.GetFromPath(path)
		if err != nil {
			errc <- err
			return
		}
		defer func() { _ = target.Close() }()
		if err := netns.Set(target); err != nil {
			errc <- err
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newNetns creates a named network namespace, deleted when the test ends, and returns
// its path.
func newNetns(t testing.TB, role string) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("rdt-%s-%s", role, hex.EncodeToString(b))
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: NewNamed switches this thread into the new namespace
		ns, err := netns.NewNamed(name)
		if err == nil {
			_ = ns.Close()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		t.Skipf("cannot create a network namespace (needs root): %v", err)
	}
	t.Cleanup(func() {
		if err := netns.DeleteNamed(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	return filepath.Join("/var/run/netns", name)
}

func handleAt(t testing.TB, path string) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ns.Close() }()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// realFixture is a private host, peer and pod namespace, and the emulated GID table of
// a mock RoCE port whose netdev is realPort with 192.0.2.1 and 2001:db8:1::1.
type realFixture struct {
	host, peer, pod string
	hh, ph          *netlink.Handle
	kernel          *EmulatedKernel
	a               *Attacher
	target          Target
}

func newRealFixture(t testing.TB) *realFixture {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	f := &realFixture{host: newNetns(t, "host"), peer: newNetns(t, "peer"), pod: newNetns(t, "pod")}
	f.hh, f.ph = handleAt(t, f.host), handleAt(t, f.pod)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The port and its "switch" side.
	must(f.hh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: realPort, MTU: 9000}, PeerName: realPeer}))
	port, err := f.hh.LinkByName(realPort)
	must(err)
	peer, err := f.hh.LinkByName(realPeer)
	must(err)
	peerNS, err := netns.GetFromPath(f.peer)
	must(err)
	defer func() { _ = peerNS.Close() }()
	must(f.hh.LinkSetNsFd(peer, int(peerNS)))
	peerH := handleAt(t, f.peer)
	peer, err = peerH.LinkByName(realPeer)
	must(err)
	must(peerH.AddrAdd(peer, &netlink.Addr{IPNet: toIPNet(netip.MustParsePrefix(peerAddr + "/24"))}))
	must(peerH.LinkSetMTU(peer, 9000))
	must(peerH.LinkSetUp(peer))
	must(f.hh.AddrAdd(port, &netlink.Addr{IPNet: toIPNet(netip.MustParsePrefix("192.0.2.1/24"))}))
	must(addAddr(handle{f.hh}, port, netip.MustParsePrefix("2001:db8:1::1/64")))
	must(f.hh.LinkSetUp(port))
	must(f.hh.RouteAdd(&netlink.Route{LinkIndex: port.Attrs().Index, Dst: toIPNet(netip.MustParsePrefix("198.51.100.0/24")),
		Gw: net.ParseIP(peerAddr), Protocol: unix.RTPROT_STATIC}))
	must(f.hh.RouteAdd(&netlink.Route{LinkIndex: port.Attrs().Index, Dst: toIPNet(netip.MustParsePrefix("2001:db8:2::/48")),
		Gw: net.ParseIP("2001:db8:1::fe"), Protocol: unix.RTPROT_STATIC, Priority: 20}))
	// The private host's primary interface: the default route and the node IP.
	must(f.hh.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: realPrimary}, PeerName: "rprim1"}))
	prim, err := f.hh.LinkByName(realPrimary)
	must(err)
	prim1, err := f.hh.LinkByName("rprim1")
	must(err)
	must(f.hh.AddrAdd(prim, &netlink.Addr{IPNet: toIPNet(netip.MustParsePrefix("203.0.113.5/24"))}))
	must(f.hh.LinkSetUp(prim1))
	must(f.hh.LinkSetUp(prim))
	must(f.hh.RouteAdd(&netlink.Route{LinkIndex: prim.Attrs().Index, Gw: net.ParseIP("203.0.113.1")}))

	// The mock RoCE port: the sriov profile's PF with realPort as its netdev.
	p, err := mocknode.Lookup("sriov")
	must(err)
	node := p.Node()
	node.PCIFunctions, node.Netdevs, node.RDMADevices = node.PCIFunctions[:1], node.Netdevs[:1], node.RDMADevices[:1]
	node.Netdevs[0].Name = realPort
	node.RDMADevices[0].Ports[0].GIDs = mocknode.RoCEGIDs(realPort, mocknode.LinkLocalGID(0x0ac0ebfffe3b0000), "192.0.2.1", "2001:db8:1::1")
	dir := t.TempDir()
	must(node.Write(dir, mocknode.WriteOptions{}))
	f.kernel = NewEmulatedKernel(filepath.Join(dir, mocknode.SysDir))
	f.kernel.GIDTimeout, f.kernel.GIDInterval = 500*time.Millisecond, 2*time.Millisecond
	f.a = NewAttacher(Options{
		Namespaces: HostNamespaces(f.host), Kernel: f.kernel,
		NodeIPs: []netip.Addr{netip.MustParseAddr("203.0.113.5")}, ReturnTimeout: time.Second,
	})
	f.target = Target{PodUID: "9f8e7d6c-real", NetnsPath: f.pod}
	return f
}

// dumpNS is a canonical text of a real namespace: links (without ifindexes), their
// addresses and the main table's routes, without the IPv6 link-local ones.
func dumpNS(t testing.TB, h *netlink.Handle) string {
	t.Helper()
	links, err := h.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	var lines []string
	for _, l := range links {
		a := l.Attrs()
		if a.Name == "lo" {
			continue
		}
		addrs, err := h.AddrList(l, netlink.FAMILY_ALL)
		if err != nil {
			t.Fatal(err)
		}
		var as []string
		for _, ad := range addrs {
			if !ad.IP.IsLinkLocalUnicast() { // made by the kernel, asynchronously, wherever a link goes up
				as = append(as, ad.IPNet.String())
			}
		}
		slices.Sort(as)
		lines = append(lines, fmt.Sprintf("link %s %s mac=%s mtu=%d up=%v master=%s addrs=%v",
			a.Name, l.Type(), a.HardwareAddr, a.MTU, a.Flags&net.FlagUp != 0, names[a.MasterIndex], as))
	}
	routes, err := h.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if r.Dst != nil && (r.Dst.IP.IsLinkLocalUnicast() || r.Dst.IP.IsMulticast()) {
			continue
		}
		lines = append(lines, fmt.Sprintf("route %v via %v dev %s proto %d metric %d", r.Dst, r.Gw, names[r.LinkIndex], r.Protocol, r.Priority))
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// sendUDP sends one datagram from the pod namespace to the peer and returns the source
// address the peer saw: proof that the pod's interface reaches the port's wire.
func sendUDP(t testing.TB, f *realFixture) netip.Addr {
	t.Helper()
	var conn net.PacketConn
	if err := inNetns(f.peer, func() (err error) {
		conn, err = net.ListenPacket("udp4", peerAddr+":0")
		return err
	}); err != nil {
		t.Fatalf("listen in the peer namespace: %v", err)
	}
	defer func() { _ = conn.Close() }()
	if err := inNetns(f.pod, func() error {
		c, err := net.Dial("udp4", conn.LocalAddr().String())
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_, err = c.Write([]byte("rdma-dra"))
		return err
	}); err != nil {
		t.Fatalf("send from the pod namespace: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	_, from, err := conn.ReadFrom(buf)
	if err != nil {
		t.Fatalf("the peer received nothing from the pod: %v", err)
	}
	return netip.MustParseAddrPort(from.String()).Addr()
}

func TestRealMacvlan(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newRealFixture(t)
	before, podBefore := dumpNS(t, f.hh), dumpNS(t, f.ph)
	spec := Spec{Mode: ModeMacvlan, HostNetdev: realPort, PodIfName: "net1", MTU: 1400, IBDevice: "mlx5_0",
		Addresses: prefixes("192.0.2.10/24", "2001:db8:1::10/64"), Routes: []Route{route("198.51.100.0/24", peerAddr)}}
	var j journal
	st, err := f.a.Attach(ctx, spec, f.target, j.save)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	pod := dumpNS(t, f.ph)
	for _, want := range []string{"link net1 macvlan mac=" + st.HardwareAddr + " mtu=1400 up=true", "192.0.2.10/24", "2001:db8:1::10/64",
		"route 198.51.100.0/24 via 192.0.2.254 dev net1"} {
		if !strings.Contains(pod, want) {
			t.Errorf("pod namespace lacks %q:\n%s", want, pod)
		}
	}
	if got := dumpNS(t, f.hh); got != before {
		t.Errorf("attaching a macvlan changed the host namespace:\n%s", cmp.Diff(before, got))
	}
	if st.GIDIndex == nil || *st.GIDIndex != 7 {
		t.Errorf("GIDIndex = %v, want 7 (the RoCE v2 entry after the port's own)", deref(st.GIDIndex))
	}
	if from := sendUDP(t, f); from != netip.MustParseAddr("192.0.2.10") {
		t.Errorf("the peer saw the datagram from %s, want 192.0.2.10", from)
	}
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
		t.Errorf("host after Detach (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(podBefore, dumpNS(t, f.ph)); diff != "" {
		t.Errorf("pod after Detach (-before +after):\n%s", diff)
	}
}

func TestRealMove(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newRealFixture(t)
	before := dumpNS(t, f.hh)
	spec := Spec{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1", KeepHostAddress: true, MTU: 4000, IBDevice: "mlx5_0"}
	var j journal
	st, err := f.a.Attach(ctx, spec, f.target, j.save)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	pod, host := dumpNS(t, f.ph), dumpNS(t, f.hh)
	for _, want := range []string{"link net1 veth mac=" + st.Host.HardwareAddr + " mtu=4000 up=true", "192.0.2.1/24", "2001:db8:1::1/64",
		"route 198.51.100.0/24 via 192.0.2.254 dev net1", "route 2001:db8:2::/48 via 2001:db8:1::fe dev net1"} {
		if !strings.Contains(pod, want) {
			t.Errorf("pod namespace lacks %q:\n%s", want, pod)
		}
	}
	if strings.Contains(host, realPort) || strings.Contains(host, "192.0.2.1/") {
		t.Errorf("the host still has the port or its address:\n%s", host)
	}
	if st.GIDIndex == nil || *st.GIDIndex != 3 {
		t.Errorf("GIDIndex = %v, want 3 (the port's address, now the pod's)", deref(st.GIDIndex))
	}
	if from := sendUDP(t, f); from != netip.MustParseAddr("192.0.2.1") {
		t.Errorf("the peer saw the datagram from %s, want 192.0.2.1", from)
	}
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatalf("Detach: %v", err)
	}
	if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
		t.Errorf("host after Detach (-before +after):\n%s", diff)
	}
	if strings.Contains(dumpNS(t, f.ph), "net1") {
		t.Error("the pod still has net1")
	}
}

// TestRealCrashPoints fails the journal at every save of a macvlan and a move attach,
// without undo (a crash), and checks that Detach from the last saved State restores the
// real host namespace exactly.
func TestRealCrashPoints(t *testing.T) {
	for _, spec := range []Spec{
		{Mode: ModeMacvlan, HostNetdev: realPort, PodIfName: "net1", Addresses: prefixes("192.0.2.10/24"), IBDevice: "mlx5_0"},
		{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1", KeepHostAddress: true, IBDevice: "mlx5_0"},
	} {
		for k := 1; ; k++ {
			done := false
			t.Run(fmt.Sprintf("%s/save %d fails", spec.Mode, k), func(t *testing.T) {
				_, ctx := ktesting.NewTestContext(t)
				f := newRealFixture(t)
				f.a.noUndo = true
				before, podBefore := dumpNS(t, f.hh), dumpNS(t, f.ph)
				j := journal{failAt: k}
				if _, err := f.a.Attach(ctx, spec, f.target, j.save); err == nil {
					done = true // k is past the last save
					return
				} else if !errors.Is(err, errJournal) {
					t.Fatalf("Attach = %v, want the journal error", err)
				}
				if st, ok := j.last(); ok {
					if err := f.a.Detach(ctx, st, j.save); err != nil {
						t.Fatalf("Detach: %v", err)
					}
				}
				if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
					t.Errorf("host did not converge (-before +after):\n%s", diff)
				}
				if diff := cmp.Diff(podBefore, dumpNS(t, f.ph)); diff != "" {
					t.Errorf("pod did not converge (-before +after):\n%s", diff)
				}
			})
			if done || t.Failed() || k > 10 {
				break
			}
		}
	}
}

func TestRealPodGoneMacvlan(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newRealFixture(t)
	before := dumpNS(t, f.hh)
	var j journal
	st, err := f.a.Attach(ctx, Spec{Mode: ModeMacvlan, HostNetdev: realPort, PodIfName: "net1", Addresses: prefixes("192.0.2.10/24")}, f.target, j.save)
	if err != nil {
		t.Fatal(err)
	}
	if err := netns.DeleteNamed(filepath.Base(f.pod)); err != nil {
		t.Fatal(err)
	}
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatalf("Detach after the pod namespace is gone: %v", err)
	}
	if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
		t.Errorf("host after Detach (-before +after):\n%s", diff)
	}
}

func TestRealRefusePrimary(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newRealFixture(t)
	before := dumpNS(t, f.hh)
	var j journal
	_, err := f.a.Attach(ctx, Spec{Mode: ModeMove, HostNetdev: realPrimary, PodIfName: "net1"}, f.target, j.save)
	if !errors.Is(err, ErrPrimaryInterface) || !strings.Contains(err.Error(), "default route") {
		t.Fatalf("Attach of the default-route netdev = %v, want a refusal naming the default route", err)
	}
	// A host-network pod: its namespace is the host's, reached by another path.
	_, err = f.a.Attach(ctx, Spec{Mode: ModeMove, HostNetdev: realPort, PodIfName: "net1"},
		Target{PodUID: "hostnet", NetnsPath: "/var/run/netns/./" + filepath.Base(f.host)}, j.save)
	if !errors.Is(err, ErrHostNamespace) {
		t.Errorf("Attach into the host's own namespace = %v, want ErrHostNamespace", err)
	}
	if err := CheckNotPrimary(handle{f.hh}, realPort, []netip.Addr{netip.MustParseAddr("192.0.2.1")}); !errors.Is(err, ErrPrimaryInterface) {
		t.Errorf("CheckNotPrimary with the port's address as a node IP = %v, want a refusal", err)
	}
	if diff := cmp.Diff(before, dumpNS(t, f.hh)); diff != "" {
		t.Errorf("a refusal changed the host (-before +after):\n%s", diff)
	}
}

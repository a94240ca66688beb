package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode/mocknet"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// Network attachment on the mock node (docs/network-attachment.md): the mock netdevs are
// real host interfaces (veth ends with the tree's names, MACs, MTUs and addresses, made by
// the cluster tool), so macvlan children, moves and addresses are real kernel work; the
// GID tables are the mock sysfs's, written by the plugin's emulated RDMA kernel.

// The RoCE ports of the dgx-h100 mock node and their netdevs.
const (
	rocePortA   = "mlx5_8"
	roceNetdevA = "enp168s0f0np0"
	rocePortB   = "mlx5_9"
	roceNetdevB = "enp168s0f1np1"
	// ibPort is an InfiniBand port for the IPoIB attachment.
	ibPort = "mlx5_0"
	// podIf is the driver's default interface name in the pod.
	podIf = "rdma0"
)

// rdmaConfig is an RdmaConfig with only a network section, as JSON.
func rdmaConfig(t *testing.T, n v1alpha1.NetworkConfig) string {
	t.Helper()
	data, err := json.Marshal(map[string]any{"apiVersion": "rdma.dra.io/v1alpha1", "kind": "RdmaConfig", "network": n})
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// netPool creates an RdmaPool named name whose config grants what a test's claims ask
// (config: RdmaConfig fields, such as network and allowedNetwork) and returns its
// DeviceClass: the chart's default classes attach nothing and allow no network field
// (docs/security.md), so attachment goes through a pool the admin writes on purpose.
func netPool(t *testing.T, name string, mode v1alpha1.PoolMode, config map[string]any) string {
	t.Helper()
	data, err := json.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	env.CreateConfigPool(t, name, mode, string(data))
	return name
}

// addressPoolNames returns the names of the node's address pools (the cluster tool's
// values), for a pool that grants them all.
func addressPoolNames(t *testing.T) []string {
	t.Helper()
	pools, err := env.AddressPools()
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(pools))
	for _, p := range pools {
		names = append(names, p.Name)
	}
	return names
}

// macvlanPool is a shared pool whose claims may ask for a macvlan with addresses of
// the node's pools and an MTU up to 9000.
func macvlanPool(t *testing.T, name string) string {
	t.Helper()
	return netPool(t, name, v1alpha1.PoolModeShared, map[string]any{"allowedCharDevices": "verbs",
		"allowedNetwork": map[string]any{"modes": []string{"macvlan"}, "addressPools": addressPoolNames(t), "maxMTU": 9000}})
}

// hostState is what the host must have again after a test: its interfaces and the GID
// tables of the ports the test used.
type hostState struct {
	links []framework.HostLink
	gids  map[string][]framework.GIDEntry
}

func captureHost(host framework.Host, ibdevs ...string) (hostState, error) {
	links, err := host.Links()
	if err != nil {
		return hostState{}, err
	}
	s := hostState{links: links, gids: map[string][]framework.GIDEntry{}}
	for _, d := range ibdevs {
		if s.gids[d], err = env.GIDTable(d, 1); err != nil {
			return hostState{}, err
		}
	}
	return s, nil
}

// networkHost is the host of a network attachment test, which needs the mock node (its
// ports, netdevs and GID tables) and its host.
func networkHost(t *testing.T) framework.Host {
	t.Helper()
	env.NeedMockNode(t)
	return env.NeedHost(t, "compare the host's interfaces and the mock GID tables before and after")
}

// mustCaptureHost is captureHost at the start of a test.
func mustCaptureHost(t *testing.T, host framework.Host, ibdevs ...string) hostState {
	t.Helper()
	s, err := captureHost(host, ibdevs...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// expectHostRestored waits until the host's interfaces and the ports' GID tables are as
// they were: the plugin detaches when the pod's sandbox stops, before the pod is gone,
// but a moved netdev is restored asynchronously after a crash.
func expectHostRestored(t *testing.T, host framework.Host, before hostState) {
	t.Helper()
	ctx := framework.Context(t, 2*time.Minute)
	ibdevs := make([]string, 0, len(before.gids))
	for d := range before.gids {
		ibdevs = append(ibdevs, d)
	}
	slices.Sort(ibdevs)
	framework.Eventually(t, ctx, time.Minute, time.Second, "host interfaces and GID tables as before", func(context.Context) error {
		after, err := captureHost(host, ibdevs...)
		if err != nil {
			return err
		}
		if diff := cmp.Diff(before.links, after.links); diff != "" {
			return fmt.Errorf("host interfaces (-before +after):\n%s", diff)
		}
		if diff := cmp.Diff(before.gids, after.gids, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); diff != "" {
			return fmt.Errorf("GID tables (-before +after):\n%s", diff)
		}
		return nil
	})
}

// attached is what one pod got on one interface, checked from inside it.
type attached struct {
	pod    string
	iface  framework.PodInterface
	report framework.Report
}

// expectAttached checks the pod's interface from inside the pod (up, MTU when mtu > 0,
// exactly one IPv4 address, which addrCheck accepts), the GID index in its environment
// when roce names its RoCE port (NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX are the index of
// the RoCE v2 entry of the pod's own address on the pod interface in the port's mock GID
// table), and that the claim's networkData says what the pod sees.
func expectAttached(t *testing.T, ns, pod, ifname string, mtu int, addrCheck func(netip.Prefix) error, roce string) attached {
	t.Helper()
	ctx := framework.Context(t, 3*time.Minute)
	rep := env.WaitReport(t, ns, pod)
	iface, err := env.PodInterface(ctx, ns, pod, ifname)
	if err != nil {
		env.FailPod(t, ns, pod, fmt.Errorf("interface %s in the pod: %w", ifname, err))
	}
	if !iface.Up {
		t.Errorf("%s: %s is not up", pod, ifname)
	}
	if mtu > 0 && iface.MTU != mtu {
		t.Errorf("%s: %s has MTU %d, want %d", pod, ifname, iface.MTU, mtu)
	}
	var v4 []netip.Prefix
	for _, a := range iface.Addresses {
		if a.Addr().Is4() {
			v4 = append(v4, a)
		}
	}
	if len(v4) != 1 {
		t.Fatalf("%s: %s has IPv4 addresses %v, want one", pod, ifname, v4)
	}
	if err := addrCheck(v4[0]); err != nil {
		t.Errorf("%s: %s: %v", pod, ifname, err)
	}
	if roce != "" {
		table, err := env.GIDTable(roce, 1)
		if err != nil {
			t.Fatal(err)
		}
		idx := framework.RoCEv2Index(table, ifname, v4[0].Addr())
		if idx < 0 {
			t.Errorf("%s: no RoCE v2 GID of %s on %s in %s's table: %+v", pod, v4[0].Addr(), ifname, roce, table)
		}
		for _, k := range []string{"NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX"} {
			if got := rep.Env[k]; got != strconv.Itoa(idx) {
				t.Errorf("%s: %s=%q, want %d (the RoCE v2 GID of the pod's own address)", pod, k, got, idx)
			}
		}
	}
	expectNetworkData(t, ns, pod, iface)
	expectMetadata(t, ns, pod, iface, rep.Env["NCCL_IB_GID_INDEX"])
	return attached{pod: pod, iface: iface, report: rep}
}

// expectMetadata checks the device metadata file inside the pod (docs/device-metadata.md)
// against what the pod sees: networkData and the netdev attribute name the pod's
// interface with its addresses and MAC, gid_index is the pod's NCCL_IB_GID_INDEX (absent
// when that is), and the published facts are there.
func expectMetadata(t *testing.T, ns, pod string, iface framework.PodInterface, gidIndex string) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	dm, err := env.DeviceMetadata(ctx, ns, pod, "rdma", "hca")
	if err != nil {
		t.Errorf("%s: device metadata: %v", pod, err)
		return
	}
	if len(dm.Requests) != 1 || dm.Requests[0].Name != "hca" || len(dm.Requests[0].Devices) != 1 {
		t.Errorf("%s: device metadata has requests %+v, want one device of request hca", pod, dm.Requests)
		return
	}
	dev := dm.Requests[0].Devices[0]
	str := func(name string) string {
		if v, ok := dev.Attributes[resourceapi.QualifiedName(name)]; ok && v.StringValue != nil {
			return *v.StringValue
		}
		return ""
	}
	if str("netdev") != iface.Name || str("ibdev") == "" || !strings.HasPrefix(str("uverbs"), "/dev/infiniband/uverbs") {
		t.Errorf("%s: device metadata attributes netdev %q, ibdev %q, uverbs %q; want netdev %s and the port's ibdev and uverbs device",
			pod, str("netdev"), str("ibdev"), str("uverbs"), iface.Name)
	}
	gotGID := ""
	if v, ok := dev.Attributes["gid_index"]; ok && v.IntValue != nil {
		gotGID = strconv.FormatInt(*v.IntValue, 10)
	}
	if gotGID != gidIndex {
		t.Errorf("%s: device metadata gid_index %q, want NCCL_IB_GID_INDEX %q", pod, gotGID, gidIndex)
	}
	if dev.NetworkData == nil {
		t.Errorf("%s: device metadata has no networkData", pod)
	} else if err := describes(*dev.NetworkData, iface); err != nil {
		t.Errorf("%s: device metadata networkData: %v", pod, err)
	}
	// The runtime mounted the file through the data directory's link to the metadata
	// directory on the host's tmpfs (docs/device-metadata.md, "Where the files are").
	link := filepath.Join(env.PluginDataDir(), "dra-device-metadata")
	if target, err := env.Host.Readlink(link); err != nil || target != env.DeviceMetadataDir() {
		t.Errorf("%s links to %q (%v), want the metadata directory %s", link, target, err, env.DeviceMetadataDir())
	}
}

// describes checks that networkData describes the interface the pod sees: name,
// addresses, hardware address.
func describes(d resourceapi.NetworkDeviceData, iface framework.PodInterface) error {
	var want []string
	for _, a := range iface.Addresses {
		want = append(want, a.String())
	}
	got := slices.Clone(d.IPs)
	slices.Sort(got)
	slices.Sort(want)
	if d.InterfaceName != iface.Name || !slices.Equal(got, want) || !strings.EqualFold(d.HardwareAddress, iface.HardwareAddr) {
		return fmt.Errorf("{%s %v %s}, the pod sees {%s %v %s}", d.InterfaceName, d.IPs, d.HardwareAddress, iface.Name, want, iface.HardwareAddr)
	}
	return nil
}

// expectNetworkData checks that the claim's status.devices[].networkData describes the
// interface the pod sees: name, addresses, hardware address.
func expectNetworkData(t *testing.T, ns, pod string, iface framework.PodInterface) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	claim := env.PodClaim(t, ns, pod)
	var nd map[string]resourceapi.NetworkDeviceData
	// The plugin writes the status after the attachment, asynchronously.
	framework.Eventually(t, ctx, 30*time.Second, time.Second, pod+": networkData in the claim's status", func(ctx context.Context) error {
		c, err := env.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if nd = framework.NetworkData(c); len(nd) == 0 {
			return fmt.Errorf("claim %s has no networkData: %+v", claim.Name, c.Status.Devices)
		}
		return nil
	})
	if len(nd) != 1 {
		t.Fatalf("%s: networkData of %d devices, want 1: %+v", pod, len(nd), nd)
	}
	for dev, d := range nd {
		if err := describes(d, iface); err != nil {
			t.Errorf("%s: networkData of %s = %v", pod, dev, err)
		}
	}
}

// ping runs busybox ping over the interface from one pod to an address.
func ping(t *testing.T, ns, from, ifname string, to netip.Addr) {
	t.Helper()
	ctx := framework.Context(t, time.Minute)
	out, err := env.Exec(ctx, ns, from, "ping", "-c", "3", "-W", "2", "-I", ifname, to.String())
	if err != nil {
		t.Errorf("%s: ping %s over %s: %v", from, to, ifname, err)
		return
	}
	if !strings.Contains(out, "3 packets received") {
		t.Errorf("%s: ping %s over %s:\n%s", from, to, ifname, out)
	}
}

func inPool(t *testing.T, name string) func(netip.Prefix) error {
	t.Helper()
	pools, err := env.AddressPools()
	if err != nil {
		t.Fatal(err)
	}
	pool, err := framework.Pool(pools, name)
	if err != nil {
		t.Fatal(err)
	}
	return func(p netip.Prefix) error { return framework.InPool(pool, p) }
}

// TestRoCESharesMacvlan: two pods with a share each of one RoCE port get a macvlan child
// of the port's netdev as rdma0 with an address of the node's pool and MTU 9000, their
// NCCL_IB_GID_INDEX and UCX_IB_GID_INDEX are the index of their own address's RoCE v2
// GID, NCCL_SOCKET_IFNAME is =rdma0, the claims' networkData says what the pods see, and
// they ping each other over rdma0. Afterwards the host is as it was.
func TestRoCESharesMacvlan(t *testing.T) {
	host := networkHost(t)
	before := mustCaptureHost(t, host, rocePortA)
	ns := env.NewNamespace(t, "macvlan")
	class := macvlanPool(t, "e2e-macvlan")
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMacvlan), IPAM: ptrTo(v1alpha1.IPAMNode), MTU: ptrTo[int32](9000),
		SocketInterface: ptrTo(true)})
	env.CreateClaimTemplate(t, ns, "roce-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortA)}}, "",
		framework.OpaqueConfig(cfg)))
	pods := []string{"roce-a", "roce-b"}
	for _, p := range pods {
		env.CreatePod(t, framework.ReportPod(ns, p, "roce-share"))
	}
	check := inPool(t, roceNetdevA)
	var got []attached
	for _, p := range pods {
		a := expectAttached(t, ns, p, podIf, 9000, check, rocePortA)
		assertSees(t, p, a.report, want{ibdevs: []string{rocePortA}, gidIndex: a.report.Env["NCCL_IB_GID_INDEX"]})
		// The leading = makes NCCL match the name exactly (rdma0, not rdma01).
		if got := a.report.Env["NCCL_SOCKET_IFNAME"]; got != "="+podIf {
			t.Errorf("%s: NCCL_SOCKET_IFNAME=%q, want =%s (socketInterface: true)", p, got, podIf)
		}
		got = append(got, a)
	}
	if got[0].iface.Addresses[0] == got[1].iface.Addresses[0] {
		t.Fatalf("both pods got %s", got[0].iface.Addresses[0])
	}
	if got[0].iface.HardwareAddr == got[1].iface.HardwareAddr {
		t.Errorf("both macvlan children have MAC %s", got[0].iface.HardwareAddr)
	}
	ping(t, ns, "roce-a", podIf, got[1].iface.Addresses[0].Addr())
	ping(t, ns, "roce-b", podIf, got[0].iface.Addresses[0].Addr())

	for _, p := range pods {
		env.DeletePod(t, ns, p)
	}
	expectHostRestored(t, host, before)
}

// TestExclusiveMove: an exclusive claim in move mode takes the port's netdev itself into
// the pod, renamed as configured, with the host's address; the host no longer has it.
// After the pod is deleted the host has the netdev back with its name, MAC, address and
// MTU, up, and the port's GID table is as before.
func TestExclusiveMove(t *testing.T) {
	h := networkHost(t)
	rec, err := h.MockNetdevs()
	if err != nil {
		t.Fatal(err)
	}
	host, err := framework.FindMockNetdev(rec, roceNetdevB)
	if err != nil {
		t.Fatal(err)
	}
	if len(host.Addresses) != 1 {
		t.Fatalf("mock netdev %s has addresses %v, want one", host.Name, host.Addresses)
	}
	before := mustCaptureHost(t, h, rocePortB)
	if _, ok := framework.FindHostLink(before.links, roceNetdevB); !ok {
		t.Fatalf("the host has no %s before the test", roceNetdevB)
	}
	const ifname = "roce0"
	ns := env.NewNamespace(t, "move")
	// The admin grants move and keeps the host's address with the netdev.
	class := netPool(t, "e2e-move", v1alpha1.PoolModeExclusive, map[string]any{"allowedCharDevices": "verbs", "network": map[string]any{"keepHostAddress": true},
		"allowedNetwork": map[string]any{"modes": []string{"move"}, "interfaceNamePrefixes": []string{"roce"}}})
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMove), InterfaceName: ptrTo(ifname)})
	env.CreateClaimTemplate(t, ns, "roce-whole", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortB)}}, "",
		framework.OpaqueConfig(cfg)))
	env.CreatePod(t, framework.ReportPod(ns, "mover", "roce-whole"))
	a := expectAttached(t, ns, "mover", ifname, host.MTU, func(p netip.Prefix) error {
		if p != host.Addresses[0] {
			return fmt.Errorf("address %s, want the host's former %s", p, host.Addresses[0])
		}
		return nil
	}, rocePortB)
	if a.iface.HardwareAddr != host.HardwareAddr {
		t.Errorf("the pod's %s has MAC %s, want %s's %s", ifname, a.iface.HardwareAddr, host.Name, host.HardwareAddr)
	}
	links, err := h.Links()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range links {
		if l.Name == roceNetdevB || l.HardwareAddr == host.HardwareAddr {
			t.Errorf("the host still has %s (%s) while the pod holds it", l.Name, l.HardwareAddr)
		}
	}

	env.DeletePod(t, ns, "mover")
	expectHostRestored(t, h, before)
	links, _ = h.Links()
	if l, ok := framework.FindHostLink(links, roceNetdevB); !ok || !l.Up || l.MTU != host.MTU || !slices.Contains(l.Addresses, host.Addresses[0].String()) {
		t.Errorf("the host's %s after the pod: %+v (found %v), want up, MTU %d, %s", roceNetdevB, l, ok, host.MTU, host.Addresses[0])
	}
}

// TestIPoIBAttachment: an InfiniBand claim with an ipoib attachment gets an interface
// with an address of the IPoIB pool. On the mock node the child is a stand-in (a macvlan
// of the IPoIB interface's stand-in: this kernel has no ib_ipoib); the real ipoib child
// is covered by pkg/netattach's unit tests.
func TestIPoIBAttachment(t *testing.T) {
	host := networkHost(t)
	before := mustCaptureHost(t, host)
	ns := env.NewNamespace(t, "ipoib")
	class := netPool(t, "e2e-ipoib", v1alpha1.PoolModeShared, map[string]any{"allowedCharDevices": "verbs",
		"allowedNetwork": map[string]any{"modes": []string{"ipoib"}, "addressPools": addressPoolNames(t)}})
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeIPoIB), IPAM: ptrTo(v1alpha1.IPAMNode)})
	env.CreateClaimTemplate(t, ns, "ib-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(ibPort)}}, "",
		framework.OpaqueConfig(cfg)))
	env.CreatePod(t, framework.ReportPod(ns, "ipoib", "ib-share"))
	a := expectAttached(t, ns, "ipoib", podIf, 0, inPool(t, mocknet.IPoIBPool), "")
	assertSees(t, "ipoib", a.report, want{ibdevs: []string{ibPort}})
	env.DeletePod(t, ns, "ipoib")
	expectHostRestored(t, host, before)
}

// TestPluginKilledDuringAttach kills the plugin with SIGKILL while it attaches a pod's
// network: as soon as the claim's checkpoint entry holds an attachment journal for the
// pod (the plugin journals before every step). The pod must end up running with its
// interface (the sandbox may fail and be retried in between), and after the pod is
// deleted the host's interfaces and the port's GID table must be as before and the
// claim's checkpoint entry gone.
func TestPluginKilledDuringAttach(t *testing.T) {
	host := networkHost(t)
	ctx := framework.Context(t, 10*time.Minute)
	if err := env.WaitReady(ctx, shares); err != nil {
		t.Fatal(err)
	}
	before := mustCaptureHost(t, host, rocePortA)
	plugin, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	restarts := plugin.Status.ContainerStatuses[0].RestartCount
	pid, err := host.PluginPID(string(plugin.UID))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.WaitReady(ctx, shares); err != nil {
			t.Errorf("plugin after the test: %v", err)
		}
	})

	ns := env.NewNamespace(t, "attachcrash")
	class := macvlanPool(t, "e2e-attachcrash")
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMacvlan), IPAM: ptrTo(v1alpha1.IPAMNode)})
	env.CreateClaimTemplate(t, ns, "roce-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortA)}}, "",
		framework.OpaqueConfig(cfg)))
	env.CreatePod(t, framework.ReportPod(ns, "victim", "roce-share"))
	claim := env.PodClaim(t, ns, "victim")
	uid := string(claim.UID)

	// The journal appears at the first step of the attach; poll fast to catch it there.
	var seen []framework.Attachment
	err = framework.Poll(ctx, 3*time.Minute, 2*time.Millisecond, func(context.Context) error {
		var err error
		if seen, err = env.Attachments(uid); err != nil {
			return err
		}
		if len(seen) == 0 {
			return fmt.Errorf("no attachment journal of claim %s yet", uid)
		}
		return nil
	})
	if err != nil {
		env.FailPod(t, ns, "victim", err)
	}
	if err := host.Kill(pid); err != nil {
		t.Fatal(err)
	}
	t.Logf("SIGKILL to the plugin (pid %d) with the attachment journal at %+v", pid, seen)
	framework.Eventually(t, ctx, 3*time.Minute, time.Second, "plugin container restarted", func(ctx context.Context) error {
		p, err := env.PluginPod(ctx)
		if err != nil {
			return err
		}
		if s := p.Status.ContainerStatuses[0]; s.RestartCount <= restarts || !s.Ready {
			return fmt.Errorf("restarts %d, ready %v", s.RestartCount, s.Ready)
		}
		return nil
	})

	// The runtime may have created the container while the plugin was down: the CDI
	// spec's hook then failed its start (no attachment mark), and the kubelet created it
	// again once the plugin had attached the pod and could give it its environment.
	expectAttached(t, ns, "victim", podIf, 0, inPool(t, roceNetdevA), rocePortA)
	victim, err := env.Client.CoreV1().Pods(ns).Get(ctx, "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cs := range victim.Status.ContainerStatuses {
		last := cs.LastTerminationState.Terminated
		switch {
		case cs.RestartCount == 0:
			t.Logf("container %s started once, after the attachment", cs.Name)
		case last == nil || last.Reason != framework.StartError:
			t.Errorf("%s: container %s ran before it was restarted (last state %+v): a container must not run without its pod's attachment", framework.DriverFault, cs.Name, cs.LastTerminationState)
		default:
			t.Logf("container %s was held back before the attachment (%s: %s) and started again", cs.Name, last.Reason, last.Message)
		}
	}
	env.DeletePod(t, ns, "victim")
	expectHostRestored(t, host, before)
	framework.Eventually(t, ctx, time.Minute, time.Second, "claim's checkpoint entry removed", func(context.Context) error {
		cp, err := env.Checkpoint()
		if err != nil {
			return err
		}
		if e, ok := cp[uid]; ok {
			return fmt.Errorf("checkpoint entry left: %+v", e)
		}
		return nil
	})
}

// TestAttachmentNeedsNRI: with network attachment off (helm --set
// networkAttachment.enabled=false) a claim that asks for it fails at prepare with a
// message about network attachment, and one without it still runs.
func TestAttachmentNeedsNRI(t *testing.T) {
	env.NeedMockNode(t)
	ctx := framework.Context(t, 10*time.Minute)
	if err := env.Install(ctx, shares, "networkAttachment.enabled=false"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares); err != nil {
			t.Errorf("reinstall with network attachment: %v", err)
		}
	})
	ns := env.NewNamespace(t, "nonri")
	class := macvlanPool(t, "e2e-nonri")
	cfg := rdmaConfig(t, v1alpha1.NetworkConfig{Mode: ptrTo(v1alpha1.NetworkModeMacvlan), IPAM: ptrTo(v1alpha1.IPAMNode)})
	env.CreateClaimTemplate(t, ns, "roce-share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: class, CEL: framework.OnPort(rocePortA)}}, "",
		framework.OpaqueConfig(cfg)))
	env.CreateClaimTemplate(t, ns, "plain", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(rocePortA)}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "wants-net", "roce-share"))
	env.CreatePod(t, framework.ReportPod(ns, "plain", "plain"))
	framework.Eventually(t, ctx, 2*time.Minute, 2*time.Second, "FailedPrepareDynamicResources about network attachment", func(ctx context.Context) error {
		evs, err := env.WarningEvents(ctx, ns, "FailedPrepare")
		if err != nil {
			return err
		}
		for _, ev := range evs {
			if strings.HasPrefix(ev, "wants-net:") && strings.Contains(ev, "network attachment is not available on this node") {
				return nil
			}
		}
		return fmt.Errorf("warning events %v", evs)
	})
	assertSees(t, "plain", env.WaitReport(t, ns, "plain"), want{ibdevs: []string{rocePortA}, gidIndex: "3"})
}

func ptrTo[T any](v T) *T { return &v }

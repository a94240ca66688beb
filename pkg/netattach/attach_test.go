package netattach

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2/ktesting"
)

// The fixture node: a primary interface with the node IP and the default route, the
// sriov mock profile's RoCE PF enp59s0f0np0 (mlx5_0, 10.1.0.10 at GID index 2/3), an
// IPoIB netdev and a bond of two ports; one pod namespace.
const (
	roceNetdev = "enp59s0f0np0"
	roceMAC    = "08:c0:eb:3b:00:00"
	ibdev      = "mlx5_0"
	podPath    = "/pod"
)

type fixture struct {
	w      *fakeWorld
	kernel *EmulatedKernel
	port   string // the mlx5_0 port 1 directory of the mock tree
	a      *Attacher
	target Target
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	w := newFakeWorld()
	eth0 := w.addLink(rootFD, "device", "eth0", "52:54:00:00:00:01", 1500, true, "")
	w.addAddr(eth0, "10.0.0.5/24")
	w.addRoute(eth0, "0.0.0.0/0", "10.0.0.1", unix.RTPROT_BOOT)
	roce := w.addLink(rootFD, "device", roceNetdev, roceMAC, 9000, true, "")
	w.addAddr(roce, "10.1.0.10/24")
	w.addRoute(roce, "10.2.0.0/16", "10.1.0.1", unix.RTPROT_STATIC)
	w.addLink(rootFD, "ipoib", "ibp12s0", "", 4092, true, "")
	bond := w.addLink(rootFD, "bond", "bond0", "5c:25:73:0a:00:00", 9000, true, "")
	w.addAddr(bond, "10.3.0.5/24")
	w.addLink(rootFD, "device", "ens1f0np0", "5c:25:73:0a:00:00", 9000, true, "bond0")
	w.addLink(rootFD, "device", "ens1f1np1", "5c:25:73:0a:00:00", 9000, true, "bond0")
	w.addNS(podPath)

	dir := t.TempDir()
	p, err := mocknode.Lookup("sriov")
	if err != nil {
		t.Fatal(err)
	}
	node := p.Node()
	// The PF alone: its 16 VFs only slow every test down.
	node.PCIFunctions, node.Netdevs, node.RDMADevices = node.PCIFunctions[:1], node.Netdevs[:1], node.RDMADevices[:1]
	if err := node.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	k := NewEmulatedKernel(filepath.Join(dir, mocknode.SysDir))
	k.GIDTimeout, k.GIDInterval = 100*time.Millisecond, 5*time.Millisecond
	a := NewAttacher(Options{
		Namespaces: fakeNamespaces{w}, Kernel: k, NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.5")},
		ReturnTimeout: 500 * time.Millisecond,
	})
	return &fixture{w: w, kernel: k, port: filepath.Join(dir, mocknode.SysDir, portDir(ibdev, 1)), a: a,
		target: Target{PodUID: "0a1b2c3d-pod", NetnsPath: podPath}}
}

// world is the whole observable state: both namespaces, the GID table, RDMA moves.
func (f *fixture) world(t testing.TB) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "host:\n%spod:\n%s", f.w.dump("/host"), f.w.dump(podPath))
	for i := range mocknode.DefaultGIDTableSize {
		s := fmt.Sprint(i)
		g, _ := os.ReadFile(filepath.Join(f.port, "gids", s))
		typ, _ := os.ReadFile(filepath.Join(f.port, "gid_attrs/types", s))
		nd, _ := os.ReadFile(filepath.Join(f.port, "gid_attrs/ndevs", s))
		fmt.Fprintf(&b, "gid %d %q %q %q\n", i, g, typ, nd)
	}
	fmt.Fprintf(&b, "mlx5_0 moved: %v\n", f.kernel.Moved(ibdev))
	return b.String()
}

// gidEntry returns the GID, type and ndev of index i of the fixture port.
func (f *fixture) gidEntry(i int) string {
	s := fmt.Sprint(i)
	g, _ := os.ReadFile(filepath.Join(f.port, "gids", s))
	typ, _ := os.ReadFile(filepath.Join(f.port, "gid_attrs/types", s))
	nd, _ := os.ReadFile(filepath.Join(f.port, "gid_attrs/ndevs", s))
	return strings.TrimSpace(string(g)) + " " + strings.TrimSpace(string(typ)) + " " + strings.TrimSpace(string(nd))
}

// journal records every saved State; failAt (from 1) makes that save fail.
type journal struct {
	saved  []State
	failAt int
}

var errJournal = errors.New("journal write failed")

func (j *journal) save(st State) error {
	if j.failAt == len(j.saved)+1 {
		j.failAt = -1 // fail once
		return errJournal
	}
	j.saved = append(j.saved, st)
	return nil
}

func (j *journal) last() (State, bool) {
	if len(j.saved) == 0 {
		return State{}, false
	}
	return j.saved[len(j.saved)-1], true
}

func prefixes(s ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s {
		out = append(out, netip.MustParsePrefix(p))
	}
	return out
}

func route(dst, gw string) Route {
	r := Route{Dst: netip.MustParsePrefix(dst)}
	if gw != "" {
		r.Gateway = netip.MustParseAddr(gw)
	}
	return r
}

// attachCase is one attachment, what the pod and host must look like after it, and
// the GID index it must find.
type attachCase struct {
	name    string
	spec    Spec
	pod     []string // substrings of the pod namespace's dump
	hostNot []string // substrings the host's dump must not have while attached
	gid     *int
	moved   bool
	check   func(t *testing.T, f *fixture, st State)
}

func intp(i int) *int { return &i }

func attachCases() []attachCase {
	return []attachCase{{
		name: "macvlan IPv4 with route and MTU",
		spec: Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1", MTU: 4000,
			Addresses: prefixes("10.1.0.100/24"), Routes: []Route{route("10.9.0.0/16", "10.1.0.1")}, IBDevice: ibdev},
		pod: []string{"net1 macvlan", "mtu=4000 up=true parent=" + roceNetdev, "[10.1.0.100/24]", "10.9.0.0/16 gw 10.1.0.1"},
		gid: intp(5),
		check: func(t *testing.T, f *fixture, st State) {
			if got, want := f.gidEntry(4), "0000:0000:0000:0000:0000:ffff:0a01:0064 IB/RoCE v1 net1"; got != want {
				t.Errorf("GID 4 = %q, want %q", got, want)
			}
			if st.HardwareAddr == "" || st.HardwareAddr == roceMAC {
				t.Errorf("HardwareAddr = %q, want the macvlan's own", st.HardwareAddr)
			}
		},
	}, {
		name: "ipvlan IPv6",
		spec: Spec{Mode: ModeIPVlan, HostNetdev: roceNetdev, PodIfName: "net1",
			Addresses: prefixes("2001:db8:1::100/64"), Routes: []Route{route("2001:db8:2::/48", "2001:db8:1::1")}, IBDevice: ibdev},
		pod: []string{"net1 ipvlan mac=" + roceMAC + " mtu=9000 up=true", "[2001:db8:1::100/64]", "2001:db8:2::/48 gw 2001:db8:1::1"},
		gid: intp(5),
		check: func(t *testing.T, f *fixture, st State) {
			if got, want := f.gidEntry(5), "2001:0db8:0001:0000:0000:0000:0000:0100 RoCE v2 net1"; got != want {
				t.Errorf("GID 5 = %q, want %q", got, want)
			}
		},
	}, {
		name: "macvlan dual stack prefers IPv4 GID",
		spec: Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "eth1",
			Addresses: prefixes("2001:db8:1::100/64", "10.1.0.100/24"), IBDevice: ibdev},
		pod: []string{"eth1 macvlan", "[10.1.0.100/24 2001:db8:1::100/64]"},
		gid: intp(7),
	}, {
		name: "macvlan on a bond",
		spec: Spec{Mode: ModeMacvlan, HostNetdev: "bond0", PodIfName: "net1", Addresses: prefixes("10.3.0.100/24")},
		pod:  []string{"net1 macvlan", "parent=bond0", "[10.3.0.100/24]"},
	}, {
		name: "ipoib child with P_Key",
		spec: Spec{Mode: ModeIPoIB, HostNetdev: "ibp12s0", PodIfName: "ib0", PKey: 0x8001, Addresses: prefixes("192.0.2.10/24")},
		pod:  []string{"ib0 ipoib", "mtu=4092 up=true parent=ibp12s0", "pkey=0x8001", "[192.0.2.10/24]"},
	}, {
		name: "move keeping the host address",
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true, IBDevice: ibdev},
		pod: []string{"net1 device mac=" + roceMAC + " mtu=9000 up=true", "[10.1.0.10/24]",
			"10.2.0.0/16 gw 10.1.0.1"},
		hostNot: []string{roceNetdev},
		gid:     intp(3),
		check: func(t *testing.T, f *fixture, st State) {
			if got, want := f.gidEntry(3), "0000:0000:0000:0000:0000:ffff:0a01:000a RoCE v2 net1"; got != want {
				t.Errorf("GID 3 = %q, want %q", got, want)
			}
			if st.Host == nil || st.Host.Name != roceNetdev || len(st.Host.Routes) != 1 {
				t.Errorf("Host snapshot = %+v, want %s with its static route only", st.Host, roceNetdev)
			}
		},
	}, {
		name: "move with a static address and MTU",
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", MTU: 4000,
			Addresses: prefixes("10.1.0.50/24"), IBDevice: ibdev},
		pod:     []string{"net1 device mac=" + roceMAC + " mtu=4000 up=true", "addrs=[10.1.0.50/24]"},
		hostNot: []string{roceNetdev},
		gid:     intp(3),
	}, {
		name: "move in exclusive RDMA netns mode",
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1", KeepHostAddress: true, RDMADevice: ibdev},
		pod:  []string{"net1 device", "[10.1.0.10/24]"},
		gid:  intp(3), moved: true,
	}}
}

func TestAttachDetach(t *testing.T) {
	for _, tc := range attachCases() {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			before := f.world(t)
			var j journal
			st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
			if err != nil {
				t.Fatalf("Attach: %v", err)
			}
			if saved, _ := j.last(); st.Phase != PhaseAttached || saved.Phase != PhaseAttached {
				t.Errorf("phase returned %q, saved %q, want %q", st.Phase, saved.Phase, PhaseAttached)
			}
			pod, host := f.w.dump(podPath), f.w.dump("/host")
			for _, want := range tc.pod {
				if !strings.Contains(pod, want) {
					t.Errorf("pod namespace lacks %q:\n%s", want, pod)
				}
			}
			for _, not := range tc.hostNot {
				if strings.Contains(host, not) {
					t.Errorf("host still has %q:\n%s", not, host)
				}
			}
			if strings.Contains(host, st.TempName) {
				t.Errorf("host has the temporary name %s:\n%s", st.TempName, host)
			}
			if (st.GIDIndex == nil) != (tc.gid == nil) || st.GIDIndex != nil && *st.GIDIndex != *tc.gid {
				t.Errorf("GIDIndex = %v, want %v", deref(st.GIDIndex), deref(tc.gid))
			}
			if got := f.kernel.Moved(ibdev); got != tc.moved {
				t.Errorf("RDMA device moved = %v, want %v", got, tc.moved)
			}
			if tc.check != nil {
				tc.check(t, f, st)
			}
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("Detach: %v", err)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("after Detach the world differs (-before +after):\n%s", diff)
			}
			// Detach is idempotent.
			if err := f.a.Detach(ctx, st, j.save); err != nil {
				t.Fatalf("second Detach: %v", err)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("after the second Detach the world differs (-before +after):\n%s", diff)
			}
		})
	}
}

func deref(p *int) any {
	if p == nil {
		return nil
	}
	return *p
}

func TestAttachNone(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	var j journal
	st, err := f.a.Attach(ctx, Spec{Mode: ModeNone}, f.target, j.save)
	if err != nil || st.Phase != PhaseAttached || len(j.saved) != 0 || f.w.opCount != 0 {
		t.Fatalf("Attach(none) = %+v, %v, saves %d, ops %d; want attached without any step", st, err, len(j.saved), f.w.opCount)
	}
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatal(err)
	}
}

func TestAttachRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fixture)
		spec  Spec
		want  error
		text  string
	}{{
		name: "pod interface name taken",
		setup: func(f *fixture) {
			f.w.addLink(f.w.paths[podPath], "device", "net1", "02:00:00:00:00:09", 1500, true, "")
		},
		spec: Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1"},
		want: ErrNameTaken,
	}, {
		name: "move of the primary interface (default route)",
		spec: Spec{Mode: ModeMove, HostNetdev: "eth0", PodIfName: "net1"},
		want: ErrPrimaryInterface, text: "default route",
	}, {
		name: "move of a bond slave whose bond has the node IP",
		setup: func(f *fixture) {
			f.a.nodeIPs = append(f.a.nodeIPs, netip.MustParseAddr("10.3.0.5"))
		},
		spec: Spec{Mode: ModeMove, HostNetdev: "ens1f0np0", PodIfName: "net1"},
		want: ErrPrimaryInterface, text: "bond0 has the node IP 10.3.0.5",
	}, {
		name: "move of a port whose macvlan has the node IP",
		setup: func(f *fixture) {
			f.w.addAddr(f.w.addChild(rootFD, "macvlan", "mv0", "02:00:00:00:00:0c", roceNetdev), "10.1.0.77/24")
			f.a.nodeIPs = append(f.a.nodeIPs, netip.MustParseAddr("10.1.0.77"))
		},
		spec: Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1"},
		want: ErrPrimaryInterface, text: "mv0 has the node IP 10.1.0.77",
	}, {
		name:  "move of a port with a VLAN on it",
		setup: func(f *fixture) { f.w.addChild(rootFD, "vlan", "vlan100", roceMAC, roceNetdev) },
		spec:  Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1"},
		want:  ErrUpperDevice, text: "vlan100 (vlan)",
	}, {
		name: "move of a bond slave",
		spec: Spec{Mode: ModeMove, HostNetdev: "ens1f1np1", PodIfName: "net1"},
		want: ErrUpperDevice, text: "bond0 (bond)",
	}, {
		name: "move of a bond: the kernel keeps bonds in their namespace",
		spec: Spec{Mode: ModeMove, HostNetdev: "bond0", PodIfName: "net1"},
		want: ErrBondNotMovable, text: "move bond0",
	}, {
		name:  "pod in the host network namespace",
		setup: func(f *fixture) { f.target.NetnsPath = "/host" },
		spec:  Spec{Mode: ModeMove, HostNetdev: roceNetdev, PodIfName: "net1"},
		want:  ErrHostNamespace,
	}, {
		name: "macvlan on an IPoIB netdev",
		spec: Spec{Mode: ModeMacvlan, HostNetdev: "ibp12s0", PodIfName: "net1"},
		text: "create macvlan child",
	}, {
		name: "MTU above the parent's",
		spec: Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1", MTU: 9500},
		text: "create macvlan child",
	}, {
		name: "unknown parent",
		spec: Spec{Mode: ModeIPVlan, HostNetdev: "nosuch0", PodIfName: "net1"},
		text: "look up parent nosuch0",
	}, {
		name: "invalid spec",
		spec: Spec{Mode: "bridge", HostNetdev: roceNetdev, PodIfName: "a-name-far-too-long"},
		text: `unknown mode "bridge"`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			f := newFixture(t)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := f.world(t)
			var j journal
			st, err := f.a.Attach(ctx, tc.spec, f.target, j.save)
			if err == nil {
				t.Fatal("Attach succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q, want %v containing %q", err, tc.want, tc.text)
			}
			if st.Phase != "" {
				t.Errorf("phase after undo %q, want empty (nothing left)", st.Phase)
			}
			if diff := cmp.Diff(before, f.world(t)); diff != "" {
				t.Errorf("a refused Attach changed the world (-before +after):\n%s", diff)
			}
		})
	}
}

func TestTempNameCollision(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	spec := Spec{Mode: ModeMacvlan, HostNetdev: roceNetdev, PodIfName: "net1", Addresses: prefixes("10.1.0.100/24")}
	st0 := State{Spec: spec, Target: f.target}
	taken := tempName("rdt", st0, 0)
	f.w.addLink(rootFD, "device", taken, "02:00:00:00:00:0a", 1500, false, "")
	var j journal
	st, err := f.a.Attach(ctx, spec, f.target, j.save)
	if err != nil {
		t.Fatal(err)
	}
	if st.TempName == taken || st.TempName != tempName("rdt", st0, 1) || len(st.TempName) > maxIfNameLen {
		t.Errorf("TempName %q, want the second candidate next to the taken %q", st.TempName, taken)
	}
	// A second pod may use the same interface name on the same parent.
	f.w.addNS("/pod2")
	st2, err := f.a.Attach(ctx, spec.withAddresses("10.1.0.101/24"), Target{PodUID: "other-pod", NetnsPath: "/pod2"}, j.save)
	if err != nil {
		t.Fatalf("second pod: %v", err)
	}
	if st2.TempName == st.TempName {
		t.Errorf("two pods share the temporary name %s", st.TempName)
	}
	for _, s := range []State{st, st2} {
		if err := f.a.Detach(ctx, s, j.save); err != nil {
			t.Fatal(err)
		}
	}
	if host := f.w.dump("/host"); !strings.Contains(host, taken) || strings.Contains(host, "macvlan") {
		t.Errorf("Detach touched the link holding the temporary name, or left a child:\n%s", host)
	}
}

func (s Spec) withAddresses(p ...string) Spec {
	s.Addresses = prefixes(p...)
	return s
}

func TestDetachAfterFailedJournal(t *testing.T) {
	// A journal that cannot save stops Detach before it changes anything.
	_, ctx := ktesting.NewTestContext(t)
	f := newFixture(t)
	var j journal
	st, err := f.a.Attach(ctx, attachCases()[0].spec, f.target, j.save)
	if err != nil {
		t.Fatal(err)
	}
	attached := f.world(t)
	bad := journal{failAt: 1}
	if err := f.a.Detach(ctx, st, bad.save); !errors.Is(err, errJournal) {
		t.Fatalf("Detach with a failing journal = %v, want %v", err, errJournal)
	}
	if f.world(t) != attached {
		t.Error("Detach changed the world although it could not save its state")
	}
	if err := f.a.Detach(ctx, st, j.save); err != nil {
		t.Fatal(err)
	}
}

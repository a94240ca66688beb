package podnet

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/netattach"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// innerAttacher stands for *netattach.Attacher behind the guard: it counts its calls
// and, with entered set, signals the next Attach on it and holds that one until
// release is closed.
type innerAttacher struct {
	mu      sync.Mutex
	calls   int
	entered chan struct{}
	release chan struct{}
}

func (a *innerAttacher) Attach(_ context.Context, spec netattach.Spec, target netattach.Target, _ netattach.Journal) (netattach.State, error) {
	a.mu.Lock()
	a.calls++
	entered := a.entered
	a.entered = nil
	a.mu.Unlock()
	if entered != nil {
		entered <- struct{}{}
		<-a.release
	}
	return netattach.State{Spec: spec, Target: target, Phase: netattach.PhaseAttached}, nil
}

func (a *innerAttacher) Detach(context.Context, netattach.State, netattach.Journal) error { return nil }

func (a *innerAttacher) callCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls
}

// gidTree writes the GID table of mlx5_8 port 1, size entries of which used are
// taken, as sysfs.md lays it out, and returns the sysfs root.
func gidTree(t *testing.T, size, used int) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "class/infiniband/mlx5_8/ports/1/gids")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range size {
		gid := "0000:0000:0000:0000:0000:0000:0000:0000"
		if i < used {
			gid = fmt.Sprintf("0000:0000:0000:0000:0000:ffff:0a00:%04x", i+1)
		}
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte(gid+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func prefixList(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestNodeGuardGIDRoom: an attachment whose addresses' GID entries would not fit the
// port's GID table is refused with the numbers, before the attacher is called (so the
// node and the journal are untouched); one that fits, or adds no entries, goes through.
func TestNodeGuardGIDRoom(t *testing.T) {
	one, two := prefixList("192.168.77.2/24"), prefixList("192.168.77.2/24", "fd00:77::2/64")
	tests := []struct {
		name       string
		size, used int
		spec       netattach.Spec
		want       string // a part of the refusal; empty: attached
	}{
		{"macvlan fits", 16, 12, netattach.Spec{Mode: netattach.ModeMacvlan, Addresses: one}, ""},
		{"macvlan one entry short", 16, 13, netattach.Spec{Mode: netattach.ModeMacvlan, Addresses: one},
			"GID table full: mlx5_8 port 1 has 3 free entries (0 more held by attachments under way), the pod interface's 1 address(es) need up to 4"},
		{"ipvlan, two addresses", 16, 11, netattach.Spec{Mode: netattach.ModeIPVlan, Addresses: two},
			"GID table full: mlx5_8 port 1 has 5 free entries (0 more held by attachments under way), the pod interface's 2 address(es) need up to 6"},
		{"move with the host's address only", 4, 4, netattach.Spec{Mode: netattach.ModeMove, KeepHostAddress: true}, ""},
		{"move with an added address", 4, 3, netattach.Spec{Mode: netattach.ModeMove, Addresses: one}, "has 1 free entries"},
		{"RDMA device of a move in exclusive netns mode", 4, 3, netattach.Spec{Mode: netattach.ModeMove, RDMADevice: "mlx5_8", Addresses: one}, "has 1 free entries"},
		{"ipoib adds no GID", 4, 4, netattach.Spec{Mode: netattach.ModeIPoIB, Addresses: one}, ""},
		{"none", 4, 4, netattach.Spec{Mode: netattach.ModeNone}, ""},
		{"no GID table", 0, 0, netattach.Spec{Mode: netattach.ModeMacvlan, Addresses: one}, "check room in the GID table: count free GID entries of mlx5_8 port 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			root := gidTree(t, tc.size, tc.used)
			if tc.size == 0 {
				root = t.TempDir()
			}
			inner := &innerAttacher{}
			g := NewNodeGuard(inner, root, nil)
			spec := tc.spec
			spec.IBPort = 1
			if spec.RDMADevice == "" {
				spec.IBDevice = "mlx5_8"
			}
			saved := 0
			st, err := g.Attach(ctx, spec, netattach.Target{PodUID: "pod-a"}, func(netattach.State) error { saved++; return nil })
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("attach: %v", err)
			case tc.want == "" && inner.callCount() != 1:
				t.Fatalf("attacher called %d times, want once", inner.callCount())
			case tc.want == "":
			case err == nil || !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			case inner.callCount() != 0 || saved != 0 || st.Phase != "":
				t.Errorf("refused, yet the attacher ran %d times, %d journal saves, phase %q: want nothing done", inner.callCount(), saved, st.Phase)
			}
			if strings.HasPrefix(tc.want, "GID table full") && !errors.Is(err, errGIDTableFull) {
				t.Errorf("error %v does not wrap errGIDTableFull", err)
			}
			if len(g.pending) != 0 {
				t.Errorf("entries still held after Attach returned: %v", g.pending)
			}
		})
	}
}

// TestNodeGuardCountsAttachmentsUnderWay: the entries of an attachment under way are
// held until it returns, so a second pod on the same nearly full port is refused instead
// of both seeing room for themselves; afterwards the table itself counts.
func TestNodeGuardCountsAttachmentsUnderWay(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	inner := &innerAttacher{entered: make(chan struct{}), release: make(chan struct{})}
	g := NewNodeGuard(inner, gidTree(t, 16, 8), nil)
	spec := netattach.Spec{Mode: netattach.ModeMacvlan, IBDevice: "mlx5_8", IBPort: 1, Addresses: prefixList("192.168.77.2/24")}
	noJournal := func(netattach.State) error { return nil }
	first := make(chan error, 1)
	entered := inner.entered
	go func() {
		_, err := g.Attach(ctx, spec, netattach.Target{PodUID: "pod-a"}, noJournal)
		first <- err
	}()
	<-entered
	spec.Addresses = prefixList("192.168.77.3/24", "fd00:77::3/64")
	want := "GID table full: mlx5_8 port 1 has 8 free entries (4 more held by attachments under way), the pod interface's 2 address(es) need up to 6"
	if _, err := g.Attach(ctx, spec, netattach.Target{PodUID: "pod-b"}, noJournal); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("second attach: error %v, want it to contain %q", err, want)
	}
	close(inner.release)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// The first pod's entries would be in the table now; this fixture stays as written.
	if _, err := g.Attach(ctx, spec, netattach.Target{PodUID: "pod-b"}, noJournal); err != nil {
		t.Errorf("attach after the first returned: %v", err)
	}
}

// TestAllocatePodAddressSkipsNodeAddresses: the pool allocator of the plugin skips the
// host's addresses (the port netdev's among them), its route gateways and the node IPs,
// read at allocation time, and hands out nothing when it cannot read them.
func TestAllocatePodAddressSkipsNodeAddresses(t *testing.T) {
	cfg, err := nodeconfig.Parse([]byte("network:\n  addressPools:\n  - {name: rail0, subnet: 192.168.77.0/24}\n"))
	if err != nil {
		t.Fatal(err)
	}
	pool, ok := cfg.PoolFor("node-a", &discovery.Port{IBDev: "mlx5_8", Port: 1, Netdev: "enp168s0f0np0", LinkLayer: discovery.LinkLayerEthernet})
	if !ok {
		t.Fatal("no pool for the port")
	}
	NodeIPs := []netip.Addr{netip.MustParseAddr("192.168.77.3"), netip.MustParseAddr("fd00::1")}
	guard := func(addrs []string, err error) func() Attacher {
		return func() Attacher {
			g := NewNodeGuard(&innerAttacher{}, "", NodeIPs)
			g.hostAddrs = func() ([]netip.Addr, error) {
				var out []netip.Addr
				for _, a := range addrs {
					out = append(out, netip.MustParseAddr(a))
				}
				return out, err
			}
			return g
		}
	}
	tests := []struct {
		name      string
		attacher  func() Attacher
		inUse     []string
		want      string
		wantError string
	}{
		{"netdev's address, a gateway and a node IP", guard([]string{"192.168.77.2", "fe80::1", "192.168.77.5", "::ffff:192.168.77.6"}, nil),
			[]string{"192.168.77.4"}, "192.168.77.7/24", ""},
		{"unreadable addresses", guard(nil, errors.New("list addresses: operation not permitted")),
			nil, "", "allocate from address pool rail0: read the node's addresses: list addresses: operation not permitted"},
		{"bare attacher", func() Attacher { return &innerAttacher{} }, nil, "192.168.77.2/24", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &Network{attacher: tc.attacher()}
			used := map[netip.Addr]bool{}
			for _, a := range tc.inUse {
				used[netip.MustParseAddr(a)] = true
			}
			got, err := p.allocate(pool, used)
			switch {
			case tc.wantError != "":
				if err == nil || err.Error() != tc.wantError {
					t.Errorf("error %v, want %q", err, tc.wantError)
				}
			case err != nil:
				t.Fatal(err)
			case got.String() != tc.want:
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

package netattach

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"
	testclock "k8s.io/utils/clock/testing"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/testwait"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// mockPort writes the sriov profile's PF with the given GID table (size entries) and
// returns the sysfs root.
func mockPort(t *testing.T, size int, gids []mocknode.GID) string {
	t.Helper()
	p, _ := mocknode.Lookup("sriov")
	node := p.Node()
	node.PCIFunctions, node.Netdevs, node.RDMADevices = node.PCIFunctions[:1], node.Netdevs[:1], node.RDMADevices[:1]
	port := &node.RDMADevices[0].Ports[0]
	port.GIDTableSize = size
	if gids != nil {
		port.GIDs = gids
	}
	dir := t.TempDir()
	if err := node.Write(dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, mocknode.SysDir)
}

var (
	podV4 = netip.MustParseAddr("10.1.0.100")
	podV6 = netip.MustParseAddr("2001:db8:1::100")
	ll    = mocknode.LinkLocalGID(0x0ac0ebfffe3b0000)
)

func TestEmulatedKernelGIDs(t *testing.T) {
	v2only := []mocknode.GID{{Index: 0, GID: ll, Type: mocknode.GIDTypeRoCEv2, Ndev: roceNetdev}}
	for _, tc := range []struct {
		name  string
		size  int
		gids  []mocknode.GID
		addrs []netip.Addr
		want  []int // GID index of each address
		err   string
	}{
		{name: "mlx5 port: v1 and v2 entries after the port's own", size: 16, addrs: []netip.Addr{podV4, podV6}, want: []int{5, 7}},
		{name: "RoCE v2 only port (irdma)", size: 8, gids: v2only, addrs: []netip.Addr{podV4, podV6}, want: []int{1, 2}},
		{name: "sparse table: first free slots", size: 8, gids: []mocknode.GID{
			{Index: 0, GID: ll, Type: mocknode.GIDTypeRoCEv1, Ndev: roceNetdev}, {Index: 2, GID: ll, Type: mocknode.GIDTypeRoCEv2, Ndev: roceNetdev},
		}, addrs: []netip.Addr{podV4}, want: []int{3}},
		{name: "table full", size: 4, addrs: []netip.Addr{podV4}, err: "GID table full"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			k := NewEmulatedKernel(mockPort(t, tc.size, tc.gids))
			k.GIDTimeout = 0 // one look: an entry that is not there is not waited for
			before, _ := readTable(filepath.Join(k.root, portDir(ibdev, 1)))
			for i, a := range tc.addrs {
				err := k.AddressAdded(ctx, ibdev, 1, "net1", a)
				if tc.err != "" {
					if err == nil || !strings.Contains(err.Error(), tc.err) {
						t.Fatalf("AddressAdded = %v, want %q", err, tc.err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				// Idempotent: a second notification adds nothing.
				if err := k.AddressAdded(ctx, ibdev, 1, "net1", a); err != nil {
					t.Fatal(err)
				}
				idx, err := k.FindGID(ctx, ibdev, 1, "net1", a)
				if err != nil || idx != tc.want[i] {
					t.Errorf("FindGID(%s) = %d, %v; want %d", a, idx, err, tc.want[i])
				}
				// The real kernel's reader sees the same table.
				if idx, err := NewSysfsKernel(k.root).FindGID(ctx, ibdev, 1, "net1", a); err != nil || idx != tc.want[i] {
					t.Errorf("SysfsKernel.FindGID(%s) = %d, %v; want %d", a, idx, err, tc.want[i])
				}
				if _, err := k.FindGID(ctx, ibdev, 1, "other0", a); !errors.Is(err, ErrGIDNotFound) {
					t.Errorf("FindGID on another netdev = %v, want ErrGIDNotFound", err)
				}
			}
			for _, a := range tc.addrs {
				for range 2 {
					if err := k.AddressRemoved(ctx, ibdev, 1, "net1", a); err != nil {
						t.Fatal(err)
					}
				}
			}
			after, _ := readTable(filepath.Join(k.root, portDir(ibdev, 1)))
			if diff := cmp.Diff(before, after, cmp.AllowUnexported(gidSlot{})); diff != "" {
				t.Errorf("table after removing everything (-before +after):\n%s", diff)
			}
		})
	}
}

func TestEmulatedKernelConcurrentAdds(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	k := NewEmulatedKernel(mockPort(t, 64, nil))
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			errs[i] = k.AddressAdded(ctx, ibdev, 1, fmt.Sprintf("net%d", i), netip.AddrFrom4([4]byte{10, 1, 0, byte(100 + i)}))
		})
	}
	wg.Wait()
	seen := map[int]bool{}
	for i, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
		idx, err := k.FindGID(ctx, ibdev, 1, fmt.Sprintf("net%d", i), netip.AddrFrom4([4]byte{10, 1, 0, byte(100 + i)}))
		if err != nil || seen[idx] {
			t.Fatalf("address %d: index %d (err %v) missing or shared", i, idx, err)
		}
		seen[idx] = true
	}
}

// TestFindGIDWaits: FindGID polls until the kernel adds the entry, and gives up at its
// timeout or when the context ends; the kernel's clock paces it.
func TestFindGIDWaits(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	root := mockPort(t, 16, nil)
	k := NewEmulatedKernel(root)
	for _, tc := range []struct {
		name    string
		addr    netip.Addr
		timeout time.Duration
		// then happens while FindGID waits for its next poll.
		then func(clk *testclock.FakeClock, cancel context.CancelFunc)
		want int
		err  error
	}{
		{name: "the kernel adds the entry a little after the address", addr: podV4, timeout: 2 * time.Second,
			then: func(clk *testclock.FakeClock, _ context.CancelFunc) {
				if err := k.AddressAdded(ctx, ibdev, 1, "net1", podV4); err != nil {
					t.Error(err)
				}
				clk.Step(5 * time.Millisecond)
			}, want: 5},
		{name: "bounded by the timeout", addr: podV6, timeout: 30 * time.Millisecond,
			then: func(clk *testclock.FakeClock, _ context.CancelFunc) { clk.Step(30 * time.Millisecond) }, err: ErrGIDNotFound},
		{name: "bounded by the context", addr: podV6, timeout: time.Hour,
			then: func(_ *testclock.FakeClock, cancel context.CancelFunc) { cancel() }, err: context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			real := NewSysfsKernel(root)
			real.GIDTimeout, real.GIDInterval, real.Clock = tc.timeout, 5*time.Millisecond, clk
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			type result struct {
				idx int
				err error
			}
			found := make(chan result, 1)
			go func() {
				idx, err := real.FindGID(cctx, ibdev, 1, "net1", tc.addr)
				found <- result{idx, err}
			}()
			// The entry is not there yet: FindGID waits for its next poll.
			testwait.For(t, "FindGID waiting", clk.HasWaiters)
			tc.then(clk, cancel)
			got := testwait.Receive(t, "FindGID to return", found)
			if !errors.Is(got.err, tc.err) || tc.err == nil && got.idx != tc.want {
				t.Errorf("FindGID = %d, %v; want %d, %v", got.idx, got.err, tc.want, tc.err)
			}
		})
	}
	real := NewSysfsKernel(root)
	// The port's own address, as the profile has it.
	if idx, err := real.FindGID(ctx, ibdev, 1, roceNetdev, netip.MustParseAddr("10.1.0.10")); err != nil || idx != 3 {
		t.Errorf("FindGID of the port's address = %d, %v; want 3", idx, err)
	}
	if _, err := real.FindGID(ctx, "mlx5_9", 1, "net1", podV4); err == nil {
		t.Error("FindGID on a missing device succeeded")
	}
}

func TestEmulatedKernelMoves(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	k := NewEmulatedKernel(mockPort(t, 16, nil))
	if err := k.MoveDevice(ctx, "mlx5_9", 7); err == nil {
		t.Error("moving a device the tree does not have succeeded")
	}
	if err := k.MoveDevice(ctx, ibdev, 7); err != nil || !k.Moved(ibdev) {
		t.Fatalf("MoveDevice = %v, moved %v", err, k.Moved(ibdev))
	}
	if err := k.ReturnDevice(ctx, ibdev, -1, 3); err != nil || k.Moved(ibdev) {
		t.Fatalf("ReturnDevice = %v, moved %v", err, k.Moved(ibdev))
	}
}

// TestStateJSON checks that a State survives the caller's checkpoint (JSON) intact.
func TestStateJSON(t *testing.T) {
	st := State{
		Spec:   Spec{Mode: ModeMove, HostNetdev: "bond0", PodIfName: "net1", MTU: 9000, Addresses: prefixes("10.1.0.5/24", "2001:db8::5/64"), Routes: []Route{route("10.2.0.0/16", "10.1.0.1"), route("10.3.0.0/16", "")}, KeepHostAddress: true, RDMADevice: "mlx5_bond_0", IBPort: 1},
		Target: Target{PodUID: "u", NetnsPath: "/var/run/netns/cni-1"}, Phase: PhaseAttaching, TempName: "rdt01234567",
		Host: &HostSnapshot{Name: "bond0", HardwareAddr: "5c:25:73:0a:00:00", Index: 7, Type: "bond", MTU: 9000, Up: true,
			Addresses: prefixes("10.1.0.5/24"), Routes: []HostRoute{{Dst: netip.MustParsePrefix("10.2.0.0/16"), Gateway: netip.MustParseAddr("10.1.0.1"), Protocol: 4}}},
		HardwareAddr: "5c:25:73:0a:00:00", PodAddresses: prefixes("10.1.0.5/24"), GIDIndex: intp(3), RDMAMoved: true,
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var got State
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(st, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("round trip (-want +got):\n%s\n%s", diff, b)
	}
}

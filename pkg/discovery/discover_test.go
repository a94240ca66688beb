package discovery_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2"

	. "github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// wantMixed is the inventory of mixedNode, written out fact by fact.
func wantMixed() []Port {
	c := charDevs(mixedNode())
	return []Port{
		{
			IBDev: "mlx4_0", Port: 1, LinkLayer: LinkLayerInfiniBand, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr(56), Rate: "56 Gb/sec (4X FDR)", Netdev: "ibs17b", MTU: ptr(65520), NetdevOperState: "up", LID: ptr(18), SMLID: ptr(1),
			NodeGUID: "0002:c903:00a1:b2c0", FWVer: "2.42.5000", BoardID: "MT_1090120019", HCAType: "MT4103", Model: "ConnectX-3 Pro",
			VendorID: "15b3", DeviceID: "1007", Driver: "mlx4_core", PCIBusID: "0000:17:00.0", PCIeRoot: "pci0000:16", NUMANode: ptr(1),
			Verbs: c["uverbs3"], UMAD: c["umad3"], ISSM: c["issm3"],
		},
		{
			IBDev: "mlx4_0", Port: 2, LinkLayer: LinkLayerInfiniBand, State: "DOWN", PhysState: "Disabled",
			SpeedGbps: ptr(10), Rate: "10 Gb/sec (4X SDR)", Netdev: "ibs17a", MTU: ptr(2044), NetdevOperState: "down", LID: ptr(0), SMLID: ptr(0),
			NodeGUID: "0002:c903:00a1:b2c0", FWVer: "2.42.5000", BoardID: "MT_1090120019", HCAType: "MT4103", Model: "ConnectX-3 Pro",
			VendorID: "15b3", DeviceID: "1007", Driver: "mlx4_core", PCIBusID: "0000:17:00.0", PCIeRoot: "pci0000:16", NUMANode: ptr(1),
			Verbs: c["uverbs3"], UMAD: c["umad4"], ISSM: c["issm4"],
		},
		{
			IBDev: "mlx5_0", Port: 1, LinkLayer: LinkLayerInfiniBand, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr(400), Rate: "400 Gb/sec (4X NDR)", Netdev: "ibp3s0", MTU: ptr(4092), NetdevOperState: "up", LID: ptr(1336), SMLID: ptr(1), PortGUID: "7c8c:0903:00c3:cfee",
			NodeGUID: "7c8c:0903:00c3:cfee", FWVer: "28.44.2524", BoardID: "MT_0000000838", HCAType: "MT4129", Model: "ConnectX-7",
			VendorID: "15b3", DeviceID: "1021", Driver: "mlx5_core", PCIBusID: "0000:03:00.0", PCIeRoot: "pci0000:00", NUMANode: ptr(0),
			Verbs: c["uverbs0"], UMAD: c["umad0"], ISSM: c["issm0"],
		},
		{
			IBDev: "mlx5_2", Port: 1, LinkLayer: LinkLayerEthernet, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr(100), Rate: "100 Gb/sec (2X HDR)", Netdev: "ens4f0v0", MTU: ptr(1500), GIDIndex: ptr(3), NetdevOperState: "up", PortGUID: "00aa:bbff:fecc:0001",
			NodeGUID: mocknode.GUID(mocknode.MACToGUID(macVF)), FWVer: "22.39.1002", HCAType: "MT4125", Model: "ConnectX-6 Dx VF",
			VendorID: "15b3", DeviceID: "101e", Driver: "mlx5_core", PCIBusID: "0000:04:00.2", PCIeRoot: "pci0000:00",
			SRIOVVF: true, PhysFn: "0000:04:00.0",
			Verbs: c["uverbs2"], UMAD: c["umad2"], ISSM: c["issm2"],
		},
		{
			IBDev: "mlx5_bond_0", Port: 1, LinkLayer: LinkLayerEthernet, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr(200), Rate: "200 Gb/sec (4X HDR)", Netdev: "bond0", MTU: ptr(9000), GIDIndex: ptr(3), NetdevOperState: "up", PortGUID: "ba3f:d2ff:fe00:0010",
			NodeGUID: mocknode.GUID(mocknode.MACToGUID(macPF0)), FWVer: "22.39.1002", HCAType: "MT4125", Model: "ConnectX-6 Dx",
			VendorID: "15b3", DeviceID: "101d", Driver: "mlx5_core", PCIBusID: "0000:04:00.0", PCIeRoot: "pci0000:00",
			LAG:   true,
			Verbs: c["uverbs1"], UMAD: c["umad1"], ISSM: c["issm1"],
		},
		{
			IBDev: "rxe0", Port: 1, LinkLayer: LinkLayerEthernet, State: "ACTIVE", PhysState: "LinkUp",
			SpeedGbps: ptr(2), Rate: "2.5 Gb/sec (1X SDR)", Netdev: "eth0", MTU: ptr(1500), GIDIndex: ptr(3), NetdevOperState: "up", PortGUID: "5054:00ff:fe00:0001",
			NodeGUID: mocknode.GUID(mocknode.MACToGUID(macEth0)), FWVer: "0.0.0", Model: ModelSoftRoCE,
			Virtual: true, Verbs: c["uverbs4"],
		},
	}
}

func TestDiscoverMixedNode(t *testing.T) {
	inv := discover(t, writeNode(t, mixedNode()))
	if inv.NetnsMode != NetnsModeShared {
		t.Errorf("NetnsMode = %q, want shared", inv.NetnsMode)
	}
	if diff := cmp.Diff(wantMixed(), inv.Ports); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
}

func TestDiscoverRoots(t *testing.T) {
	empty := t.TempDir()
	exclusive := writeNode(t, &mocknode.Node{NetnsMode: "N"})
	tests := []struct {
		name      string
		root      string
		wantErr   bool
		wantPorts int
		wantMode  NetnsMode
	}{
		{name: "missing root", root: filepath.Join(empty, "nope"), wantErr: true},
		{name: "root is a file", root: filepath.Join(exclusive, "module/ib_core/parameters/netns_mode"), wantErr: true},
		{name: "no RDMA class at all", root: empty, wantMode: NetnsModeUnknown},
		{name: "RDMA class without devices", root: exclusive, wantMode: NetnsModeExclusive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv, err := New(Options{SysfsRoot: tt.root}).Discover(context.Background())
			if tt.wantErr {
				if err == nil {
					t.Fatalf("Discover(%s) succeeded, want an error", tt.root)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inv.Ports == nil || len(inv.Ports) != tt.wantPorts || inv.NetnsMode != tt.wantMode {
				t.Errorf("Discover = %d ports (nil %v), mode %q; want %d, %q", len(inv.Ports), inv.Ports == nil, inv.NetnsMode, tt.wantPorts, tt.wantMode)
			}
		})
	}
}

func TestDiscoverCanceled(t *testing.T) {
	root := writeNode(t, mixedNode())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New(Options{SysfsRoot: root}).Discover(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Discover with a canceled context: %v, want context.Canceled", err)
	}
}

func TestNetnsModeSources(t *testing.T) {
	root := writeNode(t, &mocknode.Node{NetnsMode: "N"})
	tests := []struct {
		name       string
		useNetlink bool
		netlink    func() (string, error)
		want       NetnsMode
	}{
		{name: "file only", want: NetnsModeExclusive},
		{name: "netlink answers", useNetlink: true, netlink: func() (string, error) { return "shared", nil }, want: NetnsModeShared},
		{name: "no RDMA netlink family falls back", useNetlink: true, netlink: func() (string, error) { return "", errors.New("protocol not supported") }, want: NetnsModeExclusive},
		{name: "odd netlink answer falls back", useNetlink: true, netlink: func() (string, error) { return "weird", nil }, want: NetnsModeExclusive},
		{name: "netlink not asked", netlink: func() (string, error) { return "shared", nil }, want: NetnsModeExclusive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := New(Options{SysfsRoot: root, UseNetlink: tt.useNetlink})
			if tt.netlink != nil {
				SetNetnsFromNetlink(d, tt.netlink)
			}
			inv, err := d.Discover(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if inv.NetnsMode != tt.want {
				t.Errorf("NetnsMode = %q, want %q", inv.NetnsMode, tt.want)
			}
		})
	}
}

// logLines collects the messages of a logger.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

func (l *logLines) count(substr string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

func TestUnknownFactLoggedOnce(t *testing.T) {
	root := writeNode(t, mixedNode())
	writeFile(t, root, "class/infiniband/mlx5_0/ports/1/rate", "fast\n")
	var logs logLines
	ctx := klog.NewContext(context.Background(), logs.logger())
	d := New(Options{SysfsRoot: root})
	for i := 0; i < 3; i++ {
		inv, err := d.Discover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(inv.Ports) != len(wantMixed()) {
			t.Fatalf("scan %d: %d ports, want %d", i, len(inv.Ports), len(wantMixed()))
		}
	}
	if got := logs.count("mlx5_0/ports/1 speed"); got != 1 {
		t.Errorf("garbled rate logged %d times over three scans, want once; logs:\n%s", got, strings.Join(logs.lines, "\n"))
	}
	if got := logs.count(`\"fast\"`) + logs.count(`"fast"`); got == 0 {
		t.Errorf("log does not name the garbled content; logs:\n%s", strings.Join(logs.lines, "\n"))
	}
	// A fresh Discoverer (a restarted plugin) reports it again.
	if _, err := New(Options{SysfsRoot: root}).Discover(ctx); err != nil {
		t.Fatal(err)
	}
	if got := logs.count("mlx5_0/ports/1 speed"); got != 2 {
		t.Errorf("a new Discoverer logged the problem %d times in total, want 2", got)
	}
}

package devicemodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// vpiPorts are the two ports of a dual-port ConnectX-3 Pro VPI adapter: one PCI function
// and one RDMA device (mlx4), port 1 InfiniBand, port 2 RoCE, one uverbs node for both.
func vpiPorts(ibdev string) []discovery.Port {
	ib, eth := ibPort(ibdev, 1), rocePort(ibdev, 2)
	eth.Netdev, eth.LAG, eth.MTU = "enp5s0d1", false, ptr.To(1500)
	for _, p := range []*discovery.Port{&ib, &eth} {
		p.Driver, p.DeviceID, p.Model, p.HCAType = "mlx4_core", "1007", "ConnectX-3 Pro", "MT4103"
		p.PCIBusID, p.PCIeRoot, p.NUMANode = "0000:05:00.0", "pci0000:00", ptr.To(0)
	}
	return []discovery.Port{ib, eth}
}

// iwarpPorts are the n ports of one Chelsio T5/T6 adapter (iw_cxgb4): one RDMA device
// whose ports 1..n are iWARP over Ethernet.
func iwarpPorts(ibdev string, n int) []discovery.Port {
	ports := make([]discovery.Port, 0, n)
	for i := range n {
		p := rocePort(ibdev, i+1)
		p.Netdev, p.LAG, p.GIDIndex = fmt.Sprintf("enp6s0f4d%d", i), false, nil
		p.VendorID, p.DeviceID, p.Driver, p.Model, p.HCAType = "1425", "5407", "cxgb4", "", "T540-CR"
		p.PCIBusID = "0000:06:00.4"
		ports = append(ports, p)
	}
	return ports
}

// consumption describes what a device consumes: "set:counter=value", sorted and joined
// by spaces; empty when nothing.
func consumption(d resourceapi.Device) string {
	var out []string
	for _, c := range d.ConsumesCounters {
		for _, name := range sortedKeys(c.Counters) {
			out = append(out, fmt.Sprintf("%s:%s=%s", c.CounterSet, name, ptr.To(c.Counters[name].Value).String()))
		}
	}
	slices.Sort(out)
	return strings.Join(out, " ")
}

// publishedCounterSets describes the counter sets of a result in publication order:
// "set:counter=value".
func publishedCounterSets(res *Result) []string {
	var out []string
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, cs := range s.SharedCounters {
			for _, name := range sortedKeys(cs.Counters) {
				out = append(out, fmt.Sprintf("%s:%s=%s", cs.Name, name, ptr.To(cs.Counters[name].Value).String()))
			}
		}
	}
	return out
}

// skippedPorts lists the ports Build left out as "ibdev/port".
func skippedPorts(res *Result) []string {
	var out []string
	for _, is := range res.Issues {
		if is.Attribute == "" {
			out = append(out, fmt.Sprintf("%s/%d", is.IBDev, is.Port))
		}
	}
	return out
}

// TestBuildMultiPortRDMADevices: the ports of one RDMA device share its uverbs node, so an
// exclusive device of one of them must exclude every device of the others (and
// checkInvariants checks that it does, pair by pair, for every case of every test). A
// single-port RDMA device next to them is published as it always was.
func TestBuildMultiPortRDMADevices(t *testing.T) {
	legacyExclusive := Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Mode: nodeconfig.LegacyModeExclusive}}}
	tests := []struct {
		name        string
		ports       []discovery.Port
		netns       discovery.NetnsMode // default shared
		opts        Options
		layout      []string
		counterSets []string
		consumes    map[string]string // device -> consumption; every published device
		skipped     []string
	}{
		{
			name:        "dual-port VPI: one counter set for the RDMA device, exclusive takes all of it",
			ports:       append(vpiPorts("mlx4_0"), ibPort("mlx5_0", 1)),
			layout:      []string{"c2", "d6"},
			counterSets: []string{"mlx4-0:hca=2", "mlx5-0-p1:hca=1"},
			consumes: map[string]string{
				"mlx4-0-p1": "mlx4-0:hca=2", "mlx4-0-p1-shared": "mlx4-0:hca=1",
				"mlx4-0-p2": "mlx4-0:hca=2", "mlx4-0-p2-shared": "mlx4-0:hca=1",
				// The single-port RDMA device, exactly as before.
				"mlx5-0-p1": "mlx5-0-p1:hca=1", "mlx5-0-p1-shared": "mlx5-0-p1:hca=1",
			},
		},
		{
			name:        "four-port iWARP: no limit of two counter sets per device applies",
			ports:       iwarpPorts("cxgb4_0", 4),
			layout:      []string{"c1", "d8"},
			counterSets: []string{"cxgb4-0:hca=4"},
			consumes: map[string]string{
				"cxgb4-0-p1": "cxgb4-0:hca=4", "cxgb4-0-p1-shared": "cxgb4-0:hca=1",
				"cxgb4-0-p2": "cxgb4-0:hca=4", "cxgb4-0-p2-shared": "cxgb4-0:hca=1",
				"cxgb4-0-p3": "cxgb4-0:hca=4", "cxgb4-0-p3-shared": "cxgb4-0:hca=1",
				"cxgb4-0-p4": "cxgb4-0:hca=4", "cxgb4-0-p4-shared": "cxgb4-0:hca=1",
			},
		},
		{
			name:        "exclusive only: the multi-port RDMA device needs its counter set, a single port none",
			ports:       append(vpiPorts("mlx4_0"), ibPort("mlx5_0", 1)),
			opts:        Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesExclusive}},
			layout:      []string{"c1", "d3"},
			counterSets: []string{"mlx4-0:hca=2"},
			consumes:    map[string]string{"mlx4-0-p1": "mlx4-0:hca=2", "mlx4-0-p2": "mlx4-0:hca=2", "mlx5-0-p1": ""},
		},
		{
			name:   "exclusive RDMA netns mode: whole ports only, and one port's claim holds the device",
			ports:  vpiPorts("mlx4_0"),
			netns:  discovery.NetnsModeExclusive,
			layout: []string{"c1", "d2"}, counterSets: []string{"mlx4-0:hca=2"},
			consumes: map[string]string{"mlx4-0-p1": "mlx4-0:hca=2", "mlx4-0-p2": "mlx4-0:hca=2"},
		},
		{
			name:     "shared only: shares are shared, no counters",
			ports:    vpiPorts("mlx4_0"),
			opts:     Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesShared}},
			layout:   []string{"d2"},
			consumes: map[string]string{"mlx4-0-p1-shared": "", "mlx4-0-p2-shared": ""},
		},
		{
			name:        "one port selected: published as a single-port RDMA device",
			ports:       vpiPorts("mlx4_0"),
			opts:        Options{Config: nodeconfig.Config{Exclude: []nodeconfig.Selector{{LinkTypes: []string{"Ethernet"}}}}},
			layout:      []string{"c1", "d2"},
			counterSets: []string{"mlx4-0-p1:hca=1"},
			consumes:    map[string]string{"mlx4-0-p1": "mlx4-0-p1:hca=1", "mlx4-0-p1-shared": "mlx4-0-p1:hca=1"},
		},
		{
			name:   "one port DOWN: still published, still counted",
			ports:  func() []discovery.Port { p := vpiPorts("mlx4_0"); p[1].State = "DOWN"; return p }(),
			layout: []string{"c1", "d4"}, counterSets: []string{"mlx4-0:hca=2"},
			consumes: map[string]string{
				"mlx4-0-p1": "mlx4-0:hca=2", "mlx4-0-p1-shared": "mlx4-0:hca=1",
				"mlx4-0-p2": "mlx4-0:hca=2", "mlx4-0-p2-shared": "mlx4-0:hca=1",
			},
		},
		{
			name:     "legacy shared: single-share devices of both ports",
			ports:    vpiPorts("mlx4_0"),
			opts:     Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: 2}}},
			layout:   []string{"d4"},
			consumes: map[string]string{"mlx4-0-p1-s0": "", "mlx4-0-p1-s1": "", "mlx4-0-p2-s0": "", "mlx4-0-p2-s1": ""},
		},
		{
			name:     "legacy exclusive: no counters, so one exclusive device per RDMA device, its first port",
			ports:    append(append(vpiPorts("mlx4_0"), iwarpPorts("cxgb4_0", 4)...), ibPort("mlx5_0", 1)),
			opts:     legacyExclusive,
			layout:   []string{"d3"},
			consumes: map[string]string{"cxgb4-0-p1": "", "mlx4-0-p1": "", "mlx5-0-p1": ""},
			skipped:  []string{"cxgb4_0/2", "cxgb4_0/3", "cxgb4_0/4", "mlx4_0/2"},
		},
		{
			name:     "legacy in exclusive RDMA netns mode: the same",
			ports:    vpiPorts("mlx4_0"),
			netns:    discovery.NetnsModeExclusive,
			opts:     Options{Legacy: true},
			layout:   []string{"d1"},
			consumes: map[string]string{"mlx4-0-p1": ""},
			skipped:  []string{"mlx4_0/2"},
		},
		{
			name:  "legacy exclusive: the config picks the port that stands for the device",
			ports: vpiPorts("mlx4_0"),
			opts: Options{Legacy: true, Config: nodeconfig.Config{
				Exclude: []nodeconfig.Selector{{LinkTypes: []string{"InfiniBand"}}},
				Legacy:  nodeconfig.LegacyConfig{Mode: nodeconfig.LegacyModeExclusive},
			}},
			layout:   []string{"d1"},
			consumes: map[string]string{"mlx4-0-p2": ""},
		},
		{
			name: "the RDMA device's counter set name is taken: none of its ports is published",
			// x port 1 is x-p1, the name the counter set of the RDMA device x_p1 would have.
			ports:       append([]discovery.Port{ibPort("x", 1)}, vpiPorts("x_p1")...),
			layout:      []string{"c1", "d2"},
			counterSets: []string{"x-p1:hca=1"},
			consumes:    map[string]string{"x-p1": "x-p1:hca=1", "x-p1-shared": "x-p1:hca=1"},
			skipped:     []string{"x_p1/1", "x_p1/2"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := inventory(tc.ports...)
			if tc.netns != "" {
				inv.NetnsMode = tc.netns
			}
			opts := tc.opts
			opts.NodeName = "node-a"
			res, err := Build(inv, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			if diff := cmp.Diff(tc.layout, layout(res)); diff != "" {
				t.Errorf("layout (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.counterSets, publishedCounterSets(res)); diff != "" {
				t.Errorf("counter sets (-want +got):\n%s", diff)
			}
			got := map[string]string{}
			for _, name := range deviceNames(res) {
				got[name] = consumption(device(t, res, name))
			}
			if diff := cmp.Diff(tc.consumes, got); diff != "" {
				t.Errorf("devices and what they consume (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.skipped, skippedPorts(res)); diff != "" {
				t.Errorf("ports not published (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMultiPortAllocation spells out, for a dual-port RDMA device in the default model,
// which devices the scheduler can hand to different claims at the same time, by the
// counter rule of its allocator (coAllocatable).
func TestMultiPortAllocation(t *testing.T) {
	res, err := Build(inventory(vpiPorts("mlx4_0")...), Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	counterSets := map[string]resourceapi.CounterSet{}
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, cs := range s.SharedCounters {
			counterSets[cs.Name] = cs
		}
	}
	for _, tc := range []struct {
		devices []string
		want    bool
	}{
		{devices: []string{"mlx4-0-p1"}, want: true},
		{devices: []string{"mlx4-0-p2"}, want: true},
		{devices: []string{"mlx4-0-p1", "mlx4-0-p2"}, want: false},
		{devices: []string{"mlx4-0-p1", "mlx4-0-p1-shared"}, want: false},
		{devices: []string{"mlx4-0-p1", "mlx4-0-p2-shared"}, want: false},
		{devices: []string{"mlx4-0-p2", "mlx4-0-p1-shared"}, want: false},
		// Shares of both ports coexist; a shared device counts once however many
		// shares of it are out.
		{devices: []string{"mlx4-0-p1-shared", "mlx4-0-p2-shared"}, want: true},
	} {
		t.Run(strings.Join(tc.devices, "+"), func(t *testing.T) {
			var devs []resourceapi.Device
			for _, name := range tc.devices {
				devs = append(devs, device(t, res, name))
			}
			if got := coAllocatable(counterSets, devs...); got != tc.want {
				t.Errorf("allocatable to separate claims at once: %v, want %v", got, tc.want)
			}
		})
	}
}

// TestExclusiveConflict: the prepare guard's rule. An exclusive device conflicts with
// every device of its port and of the other ports of its RDMA device; shares do not
// conflict with shares.
func TestExclusiveConflict(t *testing.T) {
	excl := func(ibdev string, port int) Holding {
		return Holding{IBDev: ibdev, PortKey: DeviceName(ibdev, port), Exclusive: true}
	}
	shared := func(ibdev string, port int) Holding {
		return Holding{IBDev: ibdev, PortKey: DeviceName(ibdev, port)}
	}
	for _, tc := range []struct {
		name       string
		want, held Holding
		wantWhy    string // substring; empty: no conflict
	}{
		{name: "exclusive, same port", want: excl("mlx4_0", 1), held: excl("mlx4_0", 1), wantWhy: "an exclusive device needs its port to itself"},
		{name: "exclusive on a shared port", want: excl("mlx4_0", 1), held: shared("mlx4_0", 1), wantWhy: "an exclusive device needs its port to itself"},
		{name: "share of an exclusive port", want: shared("mlx4_0", 1), held: excl("mlx4_0", 1), wantWhy: "the port is held exclusively"},
		{name: "exclusive, sibling port exclusive", want: excl("mlx4_0", 2), held: excl("mlx4_0", 1),
			wantWhy: "an exclusive device needs every port of its RDMA device mlx4_0 to itself: they share one uverbs device"},
		{name: "exclusive, sibling port shared", want: excl("mlx4_0", 2), held: shared("mlx4_0", 1), wantWhy: "every port of its RDMA device mlx4_0"},
		{name: "share, sibling port exclusive", want: shared("mlx4_0", 2), held: excl("mlx4_0", 1),
			wantWhy: "another port of RDMA device mlx4_0 is held exclusively, and its ports share one uverbs device"},
		{name: "shares of sibling ports", want: shared("mlx4_0", 2), held: shared("mlx4_0", 1)},
		{name: "shares of one port", want: shared("mlx4_0", 1), held: shared("mlx4_0", 1)},
		{name: "exclusive, other RDMA devices", want: excl("mlx5_0", 1), held: excl("mlx5_1", 1)},
		{name: "unknown RDMA devices match nothing", want: Holding{PortKey: "a-p1", Exclusive: true}, held: Holding{PortKey: "a-p2", Exclusive: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ExclusiveConflict(tc.want, tc.held)
			if tc.wantWhy == "" && got != "" || tc.wantWhy != "" && !strings.Contains(got, tc.wantWhy) {
				t.Errorf("ExclusiveConflict = %q, want %q", got, tc.wantWhy)
			}
		})
	}
}

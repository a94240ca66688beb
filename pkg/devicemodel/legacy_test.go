package devicemodel

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

// legacyConfig is the default node configuration with the given legacy resources.
func legacyConfig(modes nodeconfig.Modes, resources ...nodeconfig.LegacyResource) nodeconfig.Config {
	c := nodeconfig.Config{Modes: modes, LegacyResources: resources}
	c.SetDefaults()
	return c
}

// legacyIssues lists the legacy resources Build reported, "name: reason".
func legacyIssues(res *Result) []string {
	var out []string
	for _, is := range res.Issues {
		if is.LegacyResource != "" {
			out = append(out, is.LegacyResource+": "+is.Reason)
		}
	}
	return out
}

// portNames lists the ports of a legacy device as "ibdev/port".
func portNames(d Device) []string {
	var out []string
	for _, p := range d.AllPorts() {
		out = append(out, fmt.Sprintf("%s/%d", p.IBDev, p.Port))
	}
	return out
}

// mixedPorts is four IB ports and two RoCE ports, each its own RDMA device.
func mixedPorts() []discovery.Port {
	ports := manyPorts(4)
	for i := range 2 {
		p := rocePort(fmt.Sprintf("mlx5_%02d", 4+i), 1)
		p.Netdev = fmt.Sprintf("enp%ds0", 4+i)
		ports = append(ports, p)
	}
	return ports
}

func TestBuildLegacyResources(t *testing.T) {
	all := nodeconfig.LegacyResource{Name: "hca-shared-devices-a", MaxPods: 100}
	ib := nodeconfig.LegacyResource{Name: "ib", MaxPods: 4, Selectors: nodeconfig.Selector{LinkTypes: []string{"InfiniBand"}}}
	roce := nodeconfig.LegacyResource{Name: "roce", MaxPods: 2, Selectors: nodeconfig.Selector{LinkTypes: []string{"Ethernet"}}}
	none := nodeconfig.LegacyResource{Name: "none", Selectors: nodeconfig.Selector{Vendors: []string{"8086"}}}
	tests := []struct {
		name     string
		ports    []discovery.Port
		netns    discovery.NetnsMode
		legacy   bool // the legacy device model
		config   nodeconfig.Config
		layout   []string
		counters []string            // published counter sets, "set:counter=value"; nil = not checked
		consumes map[string]string   // device -> what it consumes
		ports_   map[string][]string // legacy device -> its ports
		issues   []string            // legacy resources' issues
	}{
		{
			name:   "all ports of an 8-rail node in both modes",
			ports:  manyPorts(8),
			config: legacyConfig(nodeconfig.ModesBoth, all),
			// The ports' counters move to the legacy set: no counter set per port.
			layout: []string{"c1", "d17"},
			counters: []string{
				"rdma-legacy-0:mlx5-00-p1=2", "rdma-legacy-0:mlx5-01-p1=2", "rdma-legacy-0:mlx5-02-p1=2", "rdma-legacy-0:mlx5-03-p1=2",
				"rdma-legacy-0:mlx5-04-p1=2", "rdma-legacy-0:mlx5-05-p1=2", "rdma-legacy-0:mlx5-06-p1=2", "rdma-legacy-0:mlx5-07-p1=2",
			},
			consumes: map[string]string{
				"mlx5-00-p1":        "rdma-legacy-0:mlx5-00-p1=2",
				"mlx5-00-p1-shared": "rdma-legacy-0:mlx5-00-p1=1",
				"legacy-hca-shared-devices-a": "rdma-legacy-0:mlx5-00-p1=1 rdma-legacy-0:mlx5-01-p1=1 rdma-legacy-0:mlx5-02-p1=1 rdma-legacy-0:mlx5-03-p1=1 " +
					"rdma-legacy-0:mlx5-04-p1=1 rdma-legacy-0:mlx5-05-p1=1 rdma-legacy-0:mlx5-06-p1=1 rdma-legacy-0:mlx5-07-p1=1",
			},
			ports_: map[string][]string{"legacy-hca-shared-devices-a": {"mlx5_00/1", "mlx5_01/1", "mlx5_02/1", "mlx5_03/1", "mlx5_04/1", "mlx5_05/1", "mlx5_06/1", "mlx5_07/1"}},
		},
		{
			name:   "two resources on disjoint ports",
			ports:  mixedPorts(),
			config: legacyConfig(nodeconfig.ModesBoth, ib, roce),
			layout: []string{"c1", "d14"},
			consumes: map[string]string{
				"legacy-ib":   "rdma-legacy-0:mlx5-00-p1=1 rdma-legacy-0:mlx5-01-p1=1 rdma-legacy-0:mlx5-02-p1=1 rdma-legacy-0:mlx5-03-p1=1",
				"legacy-roce": "rdma-legacy-0:mlx5-04-p1=1 rdma-legacy-0:mlx5-05-p1=1",
			},
			ports_: map[string][]string{
				"legacy-ib":   {"mlx5_00/1", "mlx5_01/1", "mlx5_02/1", "mlx5_03/1"},
				"legacy-roce": {"mlx5_04/1", "mlx5_05/1"},
			},
		},
		{
			name:   "overlapping resources: one unit each on the shared ports",
			ports:  mixedPorts(),
			config: legacyConfig(nodeconfig.ModesBoth, all, roce),
			counters: []string{
				"rdma-legacy-0:mlx5-00-p1=2", "rdma-legacy-0:mlx5-01-p1=2", "rdma-legacy-0:mlx5-02-p1=2", "rdma-legacy-0:mlx5-03-p1=2",
				"rdma-legacy-0:mlx5-04-p1=3", "rdma-legacy-0:mlx5-05-p1=3",
			},
			consumes: map[string]string{"mlx5-04-p1": "rdma-legacy-0:mlx5-04-p1=3"},
		},
		{
			name:   "a resource on some ports: the others keep their own counter sets",
			ports:  mixedPorts(),
			config: legacyConfig(nodeconfig.ModesBoth, roce),
			layout: []string{"c5", "d13"},
			counters: []string{
				"mlx5-00-p1:hca=1", "mlx5-01-p1:hca=1", "mlx5-02-p1:hca=1", "mlx5-03-p1:hca=1",
				"rdma-legacy-0:mlx5-04-p1=2", "rdma-legacy-0:mlx5-05-p1=2",
			},
		},
		{
			name:     "exclusive devices only",
			ports:    manyPorts(2),
			config:   legacyConfig(nodeconfig.ModesExclusive, all),
			counters: []string{"rdma-legacy-0:mlx5-00-p1=1", "rdma-legacy-0:mlx5-01-p1=1"},
			consumes: map[string]string{"mlx5-00-p1": "rdma-legacy-0:mlx5-00-p1=1", "legacy-hca-shared-devices-a": "rdma-legacy-0:mlx5-00-p1=1 rdma-legacy-0:mlx5-01-p1=1"},
		},
		{
			name:     "shared devices only: nothing to keep apart, no counters",
			ports:    manyPorts(2),
			config:   legacyConfig(nodeconfig.ModesShared, all),
			layout:   []string{"d3"},
			counters: []string{},
			consumes: map[string]string{"legacy-hca-shared-devices-a": ""},
		},
		{
			name:     "a dual-port RDMA device: one counter for both ports",
			ports:    vpiPorts("mlx4_0"),
			config:   legacyConfig(nodeconfig.ModesBoth, all),
			counters: []string{"rdma-legacy-0:mlx4-0=3"},
			consumes: map[string]string{
				"mlx4-0-p1": "rdma-legacy-0:mlx4-0=3", "mlx4-0-p2-shared": "rdma-legacy-0:mlx4-0=1",
				"legacy-hca-shared-devices-a": "rdma-legacy-0:mlx4-0=1",
			},
			ports_: map[string][]string{"legacy-hca-shared-devices-a": {"mlx4_0/1", "mlx4_0/2"}},
		},
		{
			name:   "40 RDMA devices: two legacy counter sets, one device consumes from both",
			ports:  manyPorts(40),
			config: legacyConfig(nodeconfig.ModesBoth, all),
			layout: []string{"c2", "d64", "d17"},
		},
		{
			name:   "70 RDMA devices: a resource on all of them needs three sets and is not published",
			ports:  manyPorts(70),
			config: legacyConfig(nodeconfig.ModesBoth, all, nodeconfig.LegacyResource{Name: "first", MaxPods: 1, Selectors: nodeconfig.Selector{IBDevs: []string{"mlx5_0?"}}}),
			issues: []string{"hca-shared-devices-a: it takes RDMA devices with whole-port devices from more than 2 counter sets of 32 counters: narrow its selectors, or publish those ports in shared mode only"},
			ports_: map[string][]string{"legacy-first": {"mlx5_00/1", "mlx5_01/1", "mlx5_02/1", "mlx5_03/1", "mlx5_04/1", "mlx5_05/1", "mlx5_06/1", "mlx5_07/1", "mlx5_08/1", "mlx5_09/1"}},
		},
		{
			name:   "a resource that selects no port",
			ports:  manyPorts(2),
			config: legacyConfig(nodeconfig.ModesBoth, none),
			layout: []string{"c2", "d4"},
			issues: []string{"none: its selectors match no port the node publishes"},
		},
		{
			name:   "legacy device model",
			ports:  manyPorts(2),
			legacy: true,
			config: legacyConfig(nodeconfig.ModesBoth, all),
			issues: []string{"hca-shared-devices-a: the legacy device model has no shared counters and no multi-allocatable devices to keep a legacy resource's ports and pods apart"},
		},
		{
			name:   "exclusive RDMA netns mode",
			ports:  manyPorts(2),
			netns:  discovery.NetnsModeExclusive,
			config: legacyConfig(nodeconfig.ModesBoth, all),
			issues: []string{"hca-shared-devices-a: in the kernel's exclusive RDMA netns mode an RDMA device is in one pod's network namespace at a time, so its ports cannot be shared"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := inventory(tt.ports...)
			if tt.netns != "" {
				inv.NetnsMode = tt.netns
			}
			res, err := Build(inv, Options{NodeName: "node-1", Legacy: tt.legacy, Config: tt.config})
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			if tt.layout != nil {
				if diff := cmp.Diff(tt.layout, layout(res)); diff != "" {
					t.Errorf("layout (-want +got):\n%s", diff)
				}
			}
			if tt.counters != nil {
				if diff := cmp.Diff(tt.counters, publishedCounterSets(res), cmpEmpty); diff != "" {
					t.Errorf("counter sets (-want +got):\n%s", diff)
				}
			}
			for name, want := range tt.consumes {
				if got := consumption(device(t, res, name)); got != want {
					t.Errorf("%s consumes %q, want %q", name, got, want)
				}
			}
			for name, want := range tt.ports_ {
				if diff := cmp.Diff(want, portNames(res.Devices[name])); diff != "" {
					t.Errorf("ports of %s (-want +got):\n%s", name, diff)
				}
			}
			if diff := cmp.Diff(tt.issues, legacyIssues(res), cmpEmpty); diff != "" {
				t.Errorf("legacy issues (-want +got):\n%s", diff)
			}
			if len(tt.issues) > 0 && (tt.legacy || tt.netns != "") {
				for _, n := range deviceNames(res) {
					if strings.HasPrefix(n, nodeconfig.LegacyDevicePrefix) {
						t.Errorf("legacy device %s published", n)
					}
				}
			}
		})
	}
}

// cmpEmpty makes nil and empty slices equal.
var cmpEmpty = cmp.Transformer("nilEmpty", func(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
})

// TestLegacyDeviceAllocation checks what the counters let the scheduler do: a legacy
// device goes with the shares of its ports and with other legacy devices, never with an
// exclusive device of one of its ports, and an exclusive device of a port it does not take
// stays free.
func TestLegacyDeviceAllocation(t *testing.T) {
	half := nodeconfig.LegacyResource{Name: "half", MaxPods: 3, Selectors: nodeconfig.Selector{IBDevs: []string{"mlx5_00", "mlx5_01"}}}
	all := nodeconfig.LegacyResource{Name: "all", MaxPods: 3}
	res, err := Build(inventory(vpiPorts("mlx4_0")[0:2:2]...), Options{NodeName: "n", Config: legacyConfig(nodeconfig.ModesBoth, all)})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	res, err = Build(inventory(manyPorts(4)...), Options{NodeName: "n", Config: legacyConfig(nodeconfig.ModesBoth, half, all)})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	sets := map[string]resourceapi.CounterSet{}
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, cs := range s.SharedCounters {
			sets[cs.Name] = cs
		}
	}
	dev := func(name string) resourceapi.Device { return device(t, res, name) }
	tests := []struct {
		devices []string
		want    bool
	}{
		{[]string{"legacy-half", "legacy-all"}, true},
		{[]string{"legacy-half", "legacy-all", "mlx5-00-p1-shared", "mlx5-01-p1-shared", "mlx5-02-p1-shared", "mlx5-03-p1-shared"}, true},
		{[]string{"legacy-half", "mlx5-00-p1"}, false},
		{[]string{"legacy-half", "mlx5-02-p1"}, true},
		{[]string{"legacy-all", "mlx5-02-p1"}, false},
		{[]string{"mlx5-02-p1", "mlx5-03-p1", "legacy-half"}, true},
	}
	for _, tt := range tests {
		var devs []resourceapi.Device
		for _, n := range tt.devices {
			devs = append(devs, dev(n))
		}
		if got := coAllocatable(sets, devs...); got != tt.want {
			t.Errorf("%v can be allocated together: %v, want %v", tt.devices, got, tt.want)
		}
	}
}

func TestLegacyDeviceAttributesAndTaints(t *testing.T) {
	ports := mixedPorts()
	ports[5].State = "DOWN"
	all := nodeconfig.LegacyResource{Name: "all", MaxPods: 5}
	ib := nodeconfig.LegacyResource{Name: "ib", MaxPods: 5, Selectors: nodeconfig.Selector{LinkTypes: []string{"InfiniBand"}}}
	res, err := Build(inventory(ports...), Options{NodeName: "n", Config: legacyConfig(nodeconfig.ModesBoth, all, ib)})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)
	a, i := device(t, res, "legacy-all"), device(t, res, "legacy-ib")
	if got := *attrOf(a, AttrPorts).IntValue; got != 6 {
		t.Errorf("legacy-all ports = %d, want 6", got)
	}
	if _, ok := lookupAttr(a, AttrLinkLayer); ok {
		t.Error("legacy-all has a link_layer, but its ports differ")
	}
	if got := *attrOf(i, AttrLinkLayer).StringValue; got != discovery.LinkLayerInfiniBand {
		t.Errorf("legacy-ib link_layer = %q", got)
	}
	if got := *attrOf(i, AttrLegacyResource).StringValue; got != "ib" {
		t.Errorf("legacy-ib legacy_resource = %q", got)
	}
	if got := *attrOf(i, AttrMode).StringValue; got != string(ModeLegacy) {
		t.Errorf("legacy-ib mode = %q", got)
	}
	if len(a.Taints) != 1 || a.Taints[0].Key != NotActiveTaintKey || a.Taints[0].Value != "DOWN" {
		t.Errorf("legacy-all taints = %+v, want %s=DOWN: one of its ports is down", a.Taints, NotActiveTaintKey)
	}
	if len(i.Taints) != 0 {
		t.Errorf("legacy-ib taints = %+v, want none: its ports are ACTIVE", i.Taints)
	}
	if a.AllowMultipleAllocations == nil || !*a.AllowMultipleAllocations {
		t.Error("legacy-all is not multi-allocatable")
	}
	c := a.Capacity[SharesCapacity]
	if c.Value.Value() != 5 || c.RequestPolicy == nil || c.RequestPolicy.Default.Value() != 1 {
		t.Errorf("legacy-all capacity = %+v, want 5 shares, default 1", c)
	}
	if got := res.Devices["legacy-all"].MaxShares; got != 5 {
		t.Errorf("MaxShares = %d, want 5", got)
	}
	names := slices.Collect(func(yield func(string) bool) {
		for _, a := range LegacyAttributes() {
			if !yield(string(a.Name)) {
				return
			}
		}
	})
	for name := range onWireNames(a) {
		if !slices.Contains(names, name) {
			t.Errorf("legacy-all has attribute %s, which LegacyAttributes does not describe", name)
		}
	}
}

// onWireNames yields a device's attribute names fully qualified.
func onWireNames(d resourceapi.Device) map[string]bool {
	out := map[string]bool{}
	for name := range d.Attributes {
		n := string(name)
		if !strings.Contains(n, "/") {
			n = AttributeDomain + "/" + n
		}
		out[n] = true
	}
	return out
}

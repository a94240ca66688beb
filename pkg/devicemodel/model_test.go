package devicemodel

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
)

func TestBuildInfiniBandPort(t *testing.T) {
	res, err := Build(inventory(ibPort("mlx5_0", 1)), Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, res)

	// The driver's own attributes go on the wire without their domain (see onWire).
	short := func(id string) resourceapi.QualifiedName { return resourceapi.QualifiedName(id) }
	attrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
		short("ibdev"): stringAttr("mlx5_0"), short("port"): intAttr(1),
		short("mode"): stringAttr("exclusive"), short("link_layer"): stringAttr("InfiniBand"),
		short("port_state"): stringAttr("ACTIVE"), short("phys_state"): stringAttr("LinkUp"),
		short("speed_gbps"): intAttr(400), short("netdev"): stringAttr("ibp3s0"), short("mtu"): intAttr(4096),
		short("numa_node"): intAttr(0), short("node_guid"): stringAttr("7c8c:0903:00c3:cfee"),
		short("fw_ver"): stringAttr("28.44.2524"), short("board_id"): stringAttr("MT_0000000838"),
		short("hca_type"): stringAttr("MT4129"), short("model"): stringAttr("ConnectX-7"),
		short("vendor_id"): stringAttr("15b3"), short("device_id"): stringAttr("1021"),
		short("driver"): stringAttr("mlx5_core"), short("sriov_vf"): boolAttr(false), short("lag"): boolAttr(false),
		short("rdma_netns"):               stringAttr("shared"),
		"resource.kubernetes.io/pcieRoot": stringAttr("pci0000:00"),
		"resource.kubernetes.io/pciBusID": stringAttr("0000:03:00.0"),
		"resource.kubernetes.io/numaNode": intAttr(0),
	}
	sharedAttrs := map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{}
	for k, v := range attrs {
		sharedAttrs[k] = v
	}
	sharedAttrs[short("mode")] = stringAttr("shared")
	consumes := []resourceapi.DeviceCounterConsumption{{
		CounterSet: "mlx5-0-p1",
		Counters:   map[string]resourceapi.Counter{"hca": {Value: apiresource.MustParse("1")}},
	}}
	sixteen := apiresource.MustParse("16")
	want := []resourceapi.Device{
		{Name: "mlx5-0-p1", Attributes: attrs, ConsumesCounters: consumes},
		{
			Name: "mlx5-0-p1-shared", Attributes: sharedAttrs, ConsumesCounters: consumes,
			AllowMultipleAllocations: ptr.To(true),
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{
				"rdma.dra.io/shares": {Value: sixteen, RequestPolicy: &resourceapi.CapacityRequestPolicy{
					Default:    ptr.To(apiresource.MustParse("1")),
					ValidRange: &resourceapi.CapacityRequestPolicyRange{Min: ptr.To(apiresource.MustParse("1")), Max: &sixteen},
				}},
			},
		},
	}
	slices := res.Resources.Pools["node-a-rdma"].Slices
	if diff := cmp.Diff([]string{"c1", "d2"}, layout(res)); diff != "" {
		t.Fatalf("layout (-want +got):\n%s", diff)
	}
	wantCounters := []resourceapi.CounterSet{{Name: "mlx5-0-p1", Counters: map[string]resourceapi.Counter{"hca": {Value: apiresource.MustParse("1")}}}}
	if diff := cmp.Diff(wantCounters, slices[0].SharedCounters, cmp.Comparer(quantityEqual)); diff != "" {
		t.Errorf("counter sets (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, slices[1].Devices, cmp.Comparer(quantityEqual)); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	wantMeta := map[string]Device{
		"mlx5-0-p1":        {Name: "mlx5-0-p1", Port: ibPort("mlx5_0", 1), Mode: ModeExclusive, PortKey: "mlx5-0-p1", Attributes: attrs},
		"mlx5-0-p1-shared": {Name: "mlx5-0-p1-shared", Port: ibPort("mlx5_0", 1), Mode: ModeShared, MaxShares: 16, PortKey: "mlx5-0-p1", Attributes: sharedAttrs},
	}
	if diff := cmp.Diff(wantMeta, res.Devices); diff != "" {
		t.Errorf("Result.Devices (-want +got):\n%s", diff)
	}
	if len(res.Issues) != 0 {
		t.Errorf("unexpected issues: %+v", res.Issues)
	}
}

func quantityEqual(a, b apiresource.Quantity) bool { return a.Cmp(b) == 0 }

func TestBuildCases(t *testing.T) {
	longFW := strings.Repeat("f", 65)
	tests := []struct {
		name    string
		ports   []discovery.Port
		noNetns bool // the node's RDMA netns mode is unknown
		opts    Options
		layout  []string
		names   []string // published devices in order; nil = not checked
		check   func(t *testing.T, res *Result)
	}{
		{
			name:   "RoCE with GID index",
			ports:  []discovery.Port{rocePort("mlx5_bond_0", 1)},
			layout: []string{"c1", "d2"},
			names:  []string{"mlx5-bond-0-p1", "mlx5-bond-0-p1-shared"},
			check: func(t *testing.T, res *Result) {
				for _, n := range []string{"mlx5-bond-0-p1", "mlx5-bond-0-p1-shared"} {
					d := device(t, res, n)
					if got := attrOf(d, AttrGIDIndex).IntValue; got == nil || *got != 3 {
						t.Errorf("%s gid_index = %v, want 3", n, got)
					}
					if got := attrOf(d, AttrLAG).BoolValue; got == nil || !*got {
						t.Errorf("%s lag = %v, want true", n, got)
					}
				}
			},
		},
		{
			name: "RoCE without GID index, IB with a stray one",
			ports: func() []discovery.Port {
				roce := rocePort("mlx5_2", 1)
				roce.GIDIndex = nil
				ib := ibPort("mlx5_3", 1)
				ib.GIDIndex = ptr.To(0)
				return []discovery.Port{roce, ib}
			}(),
			layout: []string{"c2", "d4"},
			check: func(t *testing.T, res *Result) {
				for _, n := range deviceNames(res) {
					if _, ok := lookupAttr(device(t, res, n), AttrGIDIndex); ok {
						t.Errorf("%s has gid_index", n)
					}
				}
			},
		},
		{
			name: "not ACTIVE ports are tainted with their state",
			ports: func() []discovery.Port {
				down := ibPort("mlx5_0", 1)
				down.State, down.PhysState = "DOWN", "Disabled"
				unknown := ibPort("mlx5_0", 2)
				unknown.State = ""
				return []discovery.Port{down, unknown, ibPort("mlx5_1", 1)}
			}(),
			layout: []string{"c2", "d6"}, // mlx5_0's two ports share one counter set
			check: func(t *testing.T, res *Result) {
				want := map[string]string{"mlx5-0-p1": "DOWN", "mlx5-0-p1-shared": "DOWN", "mlx5-0-p2": "Unknown", "mlx5-0-p2-shared": "Unknown"}
				for _, n := range deviceNames(res) {
					d := device(t, res, n)
					value, tainted := want[n]
					if !tainted {
						if len(d.Taints) != 0 {
							t.Errorf("%s tainted: %+v", n, d.Taints)
						}
						continue
					}
					wantTaints := []resourceapi.DeviceTaint{{Key: "rdma.dra.io/port-not-active", Value: value, Effect: resourceapi.DeviceTaintEffectNoSchedule}}
					if diff := cmp.Diff(wantTaints, d.Taints); diff != "" {
						t.Errorf("%s taints (-want +got):\n%s", n, diff)
					}
				}
				if _, ok := lookupAttr(device(t, res, "mlx5-0-p2"), AttrPortState); ok {
					t.Error("unknown port state published")
				}
			},
		},
		{
			name: "unknown facts are omitted",
			ports: func() []discovery.Port {
				p := discovery.Port{IBDev: "rxe0", Port: 1, LinkLayer: discovery.LinkLayerUnknown, State: "ACTIVE", Virtual: true}
				return []discovery.Port{p}
			}(),
			noNetns: true,
			layout:  []string{"c1", "d2"},
			check: func(t *testing.T, res *Result) {
				got := sortedKeys(device(t, res, "rxe0-p1").Attributes)
				// On the wire, under the default driver name, without the domain.
				want := []resourceapi.QualifiedName{"ibdev", "lag", "mode", "port", "port_state", "sriov_vf"}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("attributes (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "unknown NUMA node",
			ports: func() []discovery.Port {
				p, q := ibPort("mlx5_0", 1), ibPort("mlx5_1", 1)
				p.NUMANode, q.NUMANode = nil, ptr.To(-1)
				return []discovery.Port{p, q}
			}(),
			layout: []string{"c2", "d4"},
			check: func(t *testing.T, res *Result) {
				for _, n := range deviceNames(res) {
					for _, a := range []resourceapi.QualifiedName{AttrNUMANode, "resource.kubernetes.io/numaNode"} {
						if _, ok := lookupAttr(device(t, res, n), a); ok {
							t.Errorf("%s has %s", n, a)
						}
					}
				}
			},
		},
		{
			name: "strings over 64 bytes, not UTF-8, or in a non-standard form are omitted and reported",
			ports: func() []discovery.Port {
				p := ibPort("mlx5_0", 1)
				p.FWVer, p.BoardID, p.HCAType, p.PCIBusID = longFW, strings.Repeat("b", 64), "MT\xff", "0000:03:00.0:1"
				return []discovery.Port{p}
			}(),
			layout: []string{"c1", "d2"},
			check: func(t *testing.T, res *Result) {
				d := device(t, res, "mlx5-0-p1")
				for _, a := range []resourceapi.QualifiedName{AttrFWVer, AttrHCAType, "resource.kubernetes.io/pciBusID"} {
					if _, ok := lookupAttr(d, a); ok {
						t.Errorf("%s published", a)
					}
				}
				if got := attrOf(d, AttrBoardID).StringValue; got == nil || len(*got) != 64 {
					t.Errorf("64-byte board_id not published: %v", got)
				}
				var omitted []string
				for _, is := range res.Issues {
					omitted = append(omitted, string(is.Attribute))
				}
				want := []string{"rdma.dra.io/fw_ver", "rdma.dra.io/hca_type", "resource.kubernetes.io/pciBusID"}
				if diff := cmp.Diff(want, omitted); diff != "" {
					t.Errorf("issues, reported once per port (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "names are sanitized, unusable and colliding names are skipped",
			ports: []discovery.Port{
				ibPort("RXE_Eth0", 1),                    // made valid: rxe-eth0-p1
				ibPort("mlx5-0", 1),                      // sorts first, takes mlx5-0-p1
				ibPort("mlx5_0", 1),                      // collides
				ibPort(strings.Repeat("a", 55), 1),       // exclusive name fits, shared does not
				ibPort("_x", 1),                          // starts with '-'
				ibPort(strings.Repeat("b", 40), 1),       // fits
				ibPort("mlx5_1", 1), ibPort("mlx5_1", 1), // duplicate in the inventory
			},
			names: []string{"rxe-eth0-p1", "rxe-eth0-p1-shared", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-p1", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb-p1-shared",
				"mlx5-0-p1", "mlx5-0-p1-shared", "mlx5-1-p1", "mlx5-1-p1-shared"},
			check: func(t *testing.T, res *Result) {
				var skipped []string
				for _, is := range res.Issues {
					if is.Attribute == "" {
						skipped = append(skipped, is.IBDev)
					}
				}
				want := []string{"_x", strings.Repeat("a", 55), "mlx5_0", "mlx5_1"}
				if diff := cmp.Diff(want, skipped); diff != "" {
					t.Errorf("skipped ports (-want +got):\n%s", diff)
				}
				if got := *attrOf(device(t, res, "mlx5-0-p1"), AttrIBDev).StringValue; got != "mlx5-0" {
					t.Errorf("mlx5-0-p1 belongs to %q, want the port that sorts first", got)
				}
			},
		},
		{name: "8 ports: one counter slice", ports: manyPorts(8), layout: []string{"c8", "d16"}},
		{name: "9 ports: two counter slices", ports: manyPorts(9), layout: []string{"c8", "c1", "d18"}},
		{name: "32 ports fill a device slice", ports: manyPorts(32), layout: []string{"c8", "c8", "c8", "c8", "d64"}},
		{name: "33 ports", ports: manyPorts(33), layout: []string{"c8", "c8", "c8", "c8", "c1", "d64", "d2"}},
		{
			name:   "exclusive only: no counters, 128 devices per slice",
			ports:  manyPorts(130),
			opts:   Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesExclusive}},
			layout: []string{"d128", "d2"},
		},
		{
			name:   "shared only with 4 shares",
			ports:  manyPorts(2),
			opts:   Options{Config: nodeconfig.Config{Modes: nodeconfig.ModesShared, Shares: 4}},
			layout: []string{"d2"},
			names:  []string{"mlx5-00-p1-shared", "mlx5-01-p1-shared"},
			check: func(t *testing.T, res *Result) {
				c := device(t, res, "mlx5-00-p1-shared").Capacity[SharesCapacity]
				if c.Value.Value() != 4 || c.RequestPolicy.ValidRange.Max.Value() != 4 {
					t.Errorf("capacity %+v, want 4 shares", c)
				}
				if res.Devices["mlx5-00-p1-shared"].MaxShares != 4 {
					t.Errorf("MaxShares = %d", res.Devices["mlx5-00-p1-shared"].MaxShares)
				}
			},
		},
		{
			name:  "config selects ports",
			ports: []discovery.Port{ibPort("mlx5_0", 1), rocePort("mlx5_bond_0", 1)},
			opts: Options{Config: nodeconfig.Config{
				Include: []nodeconfig.Selector{{Vendors: []string{"15b3"}}},
				Exclude: []nodeconfig.Selector{{LinkTypes: []string{"Ethernet"}}},
			}},
			names: []string{"mlx5-0-p1", "mlx5-0-p1-shared"},
		},
		{
			name:   "legacy shared: single-share devices from s0",
			ports:  manyPorts(2),
			opts:   Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Shares: 3}}},
			layout: []string{"d6"},
			names:  []string{"mlx5-00-p1-s0", "mlx5-00-p1-s1", "mlx5-00-p1-s2", "mlx5-01-p1-s0", "mlx5-01-p1-s1", "mlx5-01-p1-s2"},
			check: func(t *testing.T, res *Result) {
				for _, n := range deviceNames(res) {
					d := device(t, res, n)
					if d.AllowMultipleAllocations != nil || d.Capacity != nil || d.ConsumesCounters != nil {
						t.Errorf("%s uses features the legacy model must not: %+v", n, d)
					}
				}
				want := Device{Name: "mlx5-01-p1-s2", Port: manyPorts(2)[1], Mode: ModeShared, MaxShares: 1, ShareIndex: 2, PortKey: "mlx5-01-p1",
					Attributes: device(t, res, "mlx5-01-p1-s2").Attributes}
				if diff := cmp.Diff(want, res.Devices["mlx5-01-p1-s2"]); diff != "" {
					t.Errorf("Result.Devices (-want +got):\n%s", diff)
				}
			},
		},
		{
			name:   "legacy exclusive",
			ports:  manyPorts(2),
			opts:   Options{Legacy: true, Config: nodeconfig.Config{Legacy: nodeconfig.LegacyConfig{Mode: nodeconfig.LegacyModeExclusive}}},
			layout: []string{"d2"},
			names:  []string{"mlx5-00-p1", "mlx5-01-p1"},
		},
		{
			name:   "legacy: 128 devices per slice, whole ports only",
			ports:  manyPorts(43),
			opts:   Options{Legacy: true},
			layout: []string{"d128", "d128", "d128", "d128", "d128", "d48"}, // 16 shares: 8 ports per slice
		},
		{
			name: "legacy: a tainted port limits its slice to 64",
			ports: func() []discovery.Port {
				ports := manyPorts(13)
				ports[9].State = "INIT"
				return ports
			}(),
			opts:   Options{Legacy: true},
			layout: []string{"d128", "d64", "d16"}, // untainted, it would be d128 d80
		},
		{name: "no ports: one empty slice", ports: nil, layout: []string{"d0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv := inventory(tc.ports...)
			if tc.noNetns {
				inv.NetnsMode = discovery.NetnsModeUnknown
			}
			opts := tc.opts
			opts.NodeName = "node-a"
			res, err := Build(inv, opts)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, res)
			if tc.layout != nil {
				if diff := cmp.Diff(tc.layout, layout(res)); diff != "" {
					t.Errorf("layout (-want +got):\n%s", diff)
				}
			}
			if tc.names != nil {
				if diff := cmp.Diff(tc.names, deviceNames(res)); diff != "" {
					t.Errorf("devices (-want +got):\n%s", diff)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
			// Deterministic: the same input gives the same output, whatever the
			// inventory's order.
			reversed := inventory()
			reversed.NetnsMode = inv.NetnsMode
			for i := len(inv.Ports) - 1; i >= 0; i-- {
				reversed.Ports = append(reversed.Ports, inv.Ports[i])
			}
			again, err := Build(reversed, opts)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(tc.name, "duplicate") && !strings.Contains(tc.name, "colliding") {
				if diff := cmp.Diff(res.Resources, again.Resources, cmp.Comparer(quantityEqual)); diff != "" {
					t.Errorf("output depends on inventory order (-first +second):\n%s", diff)
				}
			}
		})
	}
}

func TestBuildOptions(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantPool string
		wantErr  string
	}{
		{name: "defaults", opts: Options{NodeName: "n1"}, wantPool: "n1-rdma"},
		{name: "pool given", opts: Options{NodeName: "n1", PoolName: "rack-1/n1"}, wantPool: "rack-1/n1"},
		// A second installation on the same node must not share the pool name (issue 11).
		{name: "other driver's default pool", opts: Options{NodeName: "n1", DriverName: "rdma.example.com"}, wantPool: "n1-rdma.example.com"},
		{name: "no node", opts: Options{}, wantErr: "node name is required"},
		{name: "bad node", opts: Options{NodeName: "N_1"}, wantErr: `node name "N_1"`},
		{name: "bad driver", opts: Options{NodeName: "n1", DriverName: "rdma_dra"}, wantErr: `driver name "rdma_dra"`},
		{name: "long driver", opts: Options{NodeName: "n1", DriverName: strings.Repeat("a", 61) + ".io"}, wantErr: "at most 63"},
		{name: "bad pool", opts: Options{NodeName: "n1", PoolName: "a//b"}, wantErr: `pool name "a//b"`},
		{name: "bad config", opts: Options{NodeName: "n1", Config: nodeconfig.Config{Shares: 5000}}, wantErr: "shares"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Build(inventory(ibPort("mlx5_0", 1)), tc.opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantDriver := tc.opts.DriverName
			if wantDriver == "" {
				wantDriver = DefaultDriverName
			}
			if res.PoolName != tc.wantPool || res.DriverName != wantDriver {
				t.Errorf("pool %q driver %q", res.PoolName, res.DriverName)
			}
		})
	}
	if _, err := Build(nil, Options{NodeName: "n1"}); err == nil {
		t.Error("Build(nil) succeeded")
	}
}

func TestResourceSlices(t *testing.T) {
	res, err := Build(inventory(manyPorts(9)...), Options{NodeName: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	objs := res.ResourceSlices()
	var names []string
	for _, o := range objs {
		names = append(names, o.Name)
		if o.Spec.Pool.ResourceSliceCount != int64(len(objs)) || o.Spec.Pool.Name != "node-a-rdma" ||
			o.Spec.Driver != "rdma.dra.io" || ptr.Deref(o.Spec.NodeName, "") != "node-a" || o.Kind != "ResourceSlice" || o.APIVersion != "resource.k8s.io/v1" {
			t.Errorf("slice %s: %+v %+v", o.Name, o.TypeMeta, o.Spec.Pool)
		}
	}
	want := []string{"00000-rdma.dra.io-node-a", "00001-rdma.dra.io-node-a", "00002-rdma.dra.io-node-a"}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}

	long, err := Build(inventory(), Options{NodeName: strings.Repeat("n", 240) + ".x"})
	if err != nil {
		t.Fatal(err)
	}
	if name := long.ResourceSlices()[0].Name; len(name) > 253 || strings.HasSuffix(name, "-") || strings.HasSuffix(name, ".") {
		t.Errorf("long name %q (%d)", name, len(name))
	}
}

func TestAttributeTable(t *testing.T) {
	seen := map[resourceapi.QualifiedName]bool{}
	for _, a := range Attributes() {
		if seen[a.Name] {
			t.Errorf("%s listed twice", a.Name)
		}
		seen[a.Name] = true
		domain, id, ok := strings.Cut(string(a.Name), "/")
		if !ok || id == "" || len(id) > resourceapi.DeviceMaxIDLength || len(domain) > resourceapi.DeviceMaxDomainLength {
			t.Errorf("%s is not a fully qualified name within the API's limits", a.Name)
		}
		if a.Description == "" || a.Example == "" || a.value == nil {
			t.Errorf("%s is incomplete", a.Name)
		}
	}
	// One capacity (shares) on a shared device.
	if n := len(Attributes()) + 1; n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
		t.Errorf("%d attributes and capacities exceed the API limit", n)
	}
}

func TestLogIssues(t *testing.T) {
	p := ibPort("mlx5_0", 1)
	p.FWVer = strings.Repeat("x", 100)
	res, err := Build(inventory(p, ibPort("_bad", 1)), Options{NodeName: "n"})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Issues) != 2 {
		t.Fatalf("issues: %+v", res.Issues)
	}
	res.LogIssues(testLogger(t))
}

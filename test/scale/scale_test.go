package scale

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// testKinds discovers the profiles' mock nodes once per test.
func testKinds(t *testing.T) []*kind {
	t.Helper()
	kinds, err := discoverKinds(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return kinds
}

func TestKindsOfferTheSameAsTheExtendedResource(t *testing.T) {
	for _, k := range testKinds(t) {
		res, err := devicemodel.Build(k.inv, ModelOptions("n", false))
		if err != nil {
			t.Fatal(err)
		}
		shared := 0
		for _, d := range res.Devices {
			if d.Mode == devicemodel.ModeShared {
				shared++
			}
		}
		if len(k.sharedPorts) != shared || k.shares != shared*16 {
			t.Errorf("%s: %d shared ports, %d shares; the model has %d shared devices of 16 shares", k.profile, len(k.sharedPorts), k.shares, shared)
		}
		node := nodeObject("n", k)
		if got := node.Status.Allocatable[ExtendedResource]; got.Value() != int64(k.shares) {
			t.Errorf("%s: node offers %s of %s, want %d", k.profile, got.String(), ExtendedResource, k.shares)
		}
		if node.Annotations[kwokAnnotation] != "fake" {
			t.Errorf("%s: node is not marked for kwok: %v", k.profile, node.Annotations)
		}
	}
}

func TestFilledPorts(t *testing.T) {
	k := testKinds(t)[0] // dgx-h100: 10 ports
	for _, tc := range []struct {
		fill float64
		want int
	}{{0, 0}, {0.5, 5}, {0.9, 9}, {0.04, 0}, {0.06, 1}} {
		got := filledPorts(k, 3, tc.fill)
		if len(got) != tc.want {
			t.Errorf("fill %.2f: %d ports, want %d", tc.fill, len(got), tc.want)
		}
		if again := filledPorts(k, 3, tc.fill); !slices.Equal(got, again) {
			t.Errorf("fill %.2f: not deterministic: %v, then %v", tc.fill, got, again)
		}
		for _, p := range got {
			if !slices.Contains(k.sharedPorts, p) {
				t.Errorf("fill %.2f: %s is not a port of the node", tc.fill, p)
			}
		}
	}
	if slices.Equal(filledPorts(k, 1, 0.5), filledPorts(k, 2, 0.5)) && slices.Equal(filledPorts(k, 1, 0.5), filledPorts(k, 4, 0.5)) {
		t.Error("every node fills the same ports; the fill should differ between nodes")
	}
}

func TestFillDevices(t *testing.T) {
	k := testKinds(t)[1] // roce-lag
	def, err := devicemodel.Build(k.inv, ModelOptions("n", false))
	if err != nil {
		t.Fatal(err)
	}
	legacy, err := devicemodel.Build(k.inv, ModelOptions("n", true))
	if err != nil {
		t.Fatal(err)
	}
	ports := k.sharedPorts[:2]
	for _, tc := range []struct {
		model   Model
		res     *devicemodel.Result
		devices int
	}{
		{ModelDefault, def, 2},
		{ModelPerNIC, mustBuild(t, k, ModelPerNIC), 2},
		{ModelFewAttributes, withAttributes(def, fewAttributes), 2},
		{ModelLegacy, legacy, 0}, // counted below: every device of the two ports
	} {
		devices, shares := fillDevices(tc.res.Devices, def.Devices, tc.model, ports)
		if shares != 32 {
			t.Errorf("%s: %d shares of the extended resource, want 32 (2 ports × 16)", tc.model, shares)
		}
		want := tc.devices
		if tc.model == ModelLegacy {
			for _, d := range legacy.Devices {
				if slices.Contains(ports, d.PortKey) {
					want++
				}
			}
		}
		if len(devices) != want || want == 0 {
			t.Errorf("%s: %d devices %v, want %d", tc.model, len(devices), devices, want)
		}
		for _, name := range devices {
			if d := tc.res.Devices[name]; !slices.Contains(ports, d.PortKey) {
				t.Errorf("%s: %s is not on a filled port", tc.model, name)
			}
		}
	}
}

// mustBuild is model m of a node of k.
func mustBuild(t *testing.T, k *kind, m Model) *devicemodel.Result {
	t.Helper()
	res, err := BuildModel(k.inv, "n", m)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestModesWithoutCounters: the per-NIC and the capacity model are the plugin's model
// with modes exclusive or shared: on nodes whose RDMA devices have one port each, one
// device per port, exactly the default model's exclusive or shared device without
// counters, and no counter sets. The capacity model keeps the shares, which alone keep
// a port's claims apart.
func TestModesWithoutCounters(t *testing.T) {
	for _, k := range testKinds(t) {
		def := mustBuild(t, k, ModelDefault)
		defDevices := map[string]resourceapi.Device{}
		for _, s := range def.ResourceSlices() {
			for _, d := range s.Spec.Devices {
				defDevices[d.Name] = d
			}
		}
		for _, tc := range []struct {
			model Model
			mode  devicemodel.Mode
		}{
			{ModelPerNIC, devicemodel.ModeExclusive},
			{ModelCapacity, devicemodel.ModeShared},
		} {
			t.Run(k.profile+"/"+string(tc.model), func(t *testing.T) {
				got := mustBuild(t, k, tc.model)
				if len(got.Devices) != len(k.inv.Ports) {
					t.Errorf("%d devices, want one per port (%d)", len(got.Devices), len(k.inv.Ports))
				}
				for _, s := range got.ResourceSlices() {
					if len(s.Spec.SharedCounters) > 0 {
						t.Errorf("slice %s has %d counter sets, want none", s.Name, len(s.Spec.SharedCounters))
					}
					for _, d := range s.Spec.Devices {
						if got.Devices[d.Name].Mode != tc.mode {
							t.Errorf("device %s is %s, want %s", d.Name, got.Devices[d.Name].Mode, tc.mode)
						}
						want := defDevices[d.Name]
						want.ConsumesCounters = nil
						if diff := cmp.Diff(want, d, cmp.Comparer(func(a, b apiresource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
							t.Errorf("device %s differs from the default model's without counters (-want +got):\n%s", d.Name, diff)
						}
					}
				}
			})
		}
	}
}

func TestGPUsSharePCIeRootsWithPorts(t *testing.T) {
	k := testKinds(t)[0]
	res := gpuResources("sim-00000", k.inv)
	devs := res.Pools["sim-00000"].Slices[0].Devices
	if len(devs) != 9 { // 8 InfiniBand roots and the RoCE card's
		t.Fatalf("%d GPUs, want 9 (one per PCIe root with ports)", len(devs))
	}
	for _, d := range devs {
		root := *d.Attributes[resourceapi.QualifiedName(pcieRootAttribute)].StringValue
		if !slices.ContainsFunc(k.inv.Ports, func(p discovery.Port) bool { return p.PCIeRoot == root }) {
			t.Errorf("%s on %s: no port there", d.Name, root)
		}
	}
}

func TestScenarioPods(t *testing.T) {
	for _, s := range []Scenario{ScenarioShare, ScenarioExtendedResource, ScenarioWholePort, ScenarioNUMA, ScenarioFirstAvailable, ScenarioGPUNIC} {
		spec := s.podSpec("tmpl")
		c := spec.Containers[0]
		_, asksER := c.Resources.Requests[ExtendedResource]
		switch {
		case s.ExtendedResource && (!asksER || len(spec.ResourceClaims) > 0):
			t.Errorf("%s: want the extended resource and no claim: %+v", s.Name, spec)
		case !s.ExtendedResource && (asksER || len(spec.ResourceClaims) != 1 || *spec.ResourceClaims[0].ResourceClaimTemplateName != "tmpl"):
			t.Errorf("%s: want one claim from template tmpl and no extended resource: %+v", s.Name, spec)
		case !s.ExtendedResource && len(s.claim().Devices.Requests) == 0:
			t.Errorf("%s: claim without requests", s.Name)
		}
	}
}

func TestPlan(t *testing.T) {
	steps := plan([]float64{0, 0.5, 0.9}, 1000)
	has := func(m Model, fill float64, name string) bool {
		for _, st := range steps {
			if st.model == m && st.fill == fill && slices.ContainsFunc(st.scenarios, func(s Scenario) bool { return s.Name == name }) {
				return true
			}
		}
		return false
	}
	for _, f := range []float64{0, 0.5, 0.9} {
		if !has(ModelDefault, f, "share") || !has(ModelDefault, f, "extended-resource") {
			t.Errorf("fill %.1f: share and extended resource must be measured side by side", f)
		}
	}
	if !has(ModelDefault, 0, "numa-aligned-4") || has(ModelDefault, 0.9, "numa-aligned-4") {
		t.Error("4 ports on one NUMA node only on the empty cluster")
	}
	if !has(ModelLegacy, HeadlineFill, "share") || has(ModelLegacy, HeadlineFill, "whole-port") || !has(ModelPerNIC, HeadlineFill, "whole-port") {
		t.Error("legacy model: shares only; per-NIC model: whole ports")
	}
	if !has(ModelFewAttributes, HeadlineFill, "share") {
		t.Error("the few-attributes model is not measured")
	}
	for _, st := range plan([]float64{0, 0.5, 0.9}, maxLegacyNodes+1) {
		if st.model == ModelLegacy {
			t.Errorf("the legacy model is measured above %d nodes", maxLegacyNodes)
		}
	}
	// The tuned scheduler measures shares and the extended resource side by side, and
	// is last: the steps before it run with the default settings.
	last := steps[len(steps)-1]
	if last.percentage != TunedPercentage || last.model != ModelDefault || last.fill != HeadlineFill ||
		!slices.ContainsFunc(last.scenarios, func(s Scenario) bool { return s.Name == ScenarioShare.Name }) ||
		!slices.ContainsFunc(last.scenarios, func(s Scenario) bool { return s.Name == ScenarioExtendedResource.Name }) {
		t.Errorf("last step %+v, want shares and the extended resource with percentage %d", last, TunedPercentage)
	}
	for _, st := range steps[:len(steps)-1] {
		if st.percentage != 0 {
			t.Errorf("step %+v runs a tuned scheduler before the last step", st)
		}
	}
}

func TestWithAttributes(t *testing.T) {
	k := testKinds(t)[0]
	def, err := devicemodel.Build(k.inv, ModelOptions("n", false))
	if err != nil {
		t.Fatal(err)
	}
	attributes := func(r *devicemodel.Result) (n int) {
		for _, pool := range r.Resources.Pools {
			for _, s := range pool.Slices {
				for _, d := range s.Devices {
					n += len(d.Attributes)
				}
			}
		}
		return n
	}
	before := attributes(def)
	got := withAttributes(def, fewAttributes)
	if after := attributes(def); after != before {
		t.Errorf("the default model lost attributes: %d, then %d", before, after)
	}
	var devices int
	for name, pool := range got.Resources.Pools {
		orig := def.Resources.Pools[name]
		if len(pool.Slices) != len(orig.Slices) {
			t.Fatalf("pool %s: %d slices, want the default model's %d", name, len(pool.Slices), len(orig.Slices))
		}
		for i, s := range pool.Slices {
			if len(s.Devices) != len(orig.Slices[i].Devices) || len(s.SharedCounters) != len(orig.Slices[i].SharedCounters) {
				t.Errorf("slice %d: devices or counters differ from the default model", i)
			}
			for j, d := range s.Devices {
				devices++
				if len(d.Attributes) == 0 || len(d.Attributes) >= len(orig.Slices[i].Devices[j].Attributes) {
					t.Errorf("device %s: %d attributes, the default model has %d", d.Name, len(d.Attributes), len(orig.Slices[i].Devices[j].Attributes))
				}
				for a := range d.Attributes {
					if !slices.Contains(fewAttributes, a) {
						t.Errorf("device %s keeps attribute %s", d.Name, a)
					}
				}
				if _, ok := d.Attributes[ownAttribute(devicemodel.AttrMode)]; !ok {
					t.Errorf("device %s lost its mode, which the classes select on", d.Name)
				}
				if len(d.ConsumesCounters) != len(orig.Slices[i].Devices[j].ConsumesCounters) {
					t.Errorf("device %s: counters differ from the default model", d.Name)
				}
			}
		}
	}
	if devices != len(def.Devices) {
		t.Errorf("%d devices, want the default model's %d", devices, len(def.Devices))
	}
}

func TestHeadline(t *testing.T) {
	r := &Results{Points: []Point{
		{Nodes: 1000, Scenario: "share", Model: ModelDefault, Fill: 0.5, PodsPerSec: 20},
		{Nodes: 1000, Scenario: "extended-resource", Fill: 0.5, PodsPerSec: 80},
		{Nodes: 1000, Scenario: "share", Model: ModelDefault, Fill: 0, PodsPerSec: 99},
		{Nodes: 1000, Scenario: "share", Model: ModelLegacy, Fill: 0.5, PodsPerSec: 98},
		{Nodes: 1000, Scenario: "share", Model: ModelDefault, Fill: 0.5, PercentageOfNodesToScore: 10, PodsPerSec: 40},
		{Nodes: 1000, Scenario: "extended-resource", Fill: 0.5, PercentageOfNodesToScore: 10, PodsPerSec: 100},
	}}
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]float64{
		"sched_pods_per_sec_1000_nodes":                                 20,
		"sched_pods_per_sec_1000_nodes_extended_resource":               80,
		"sched_ratio_vs_extended_resource_1000_nodes":                   0.25,
		"sched_pods_per_sec_1000_nodes_percentage_10":                   40,
		"sched_pods_per_sec_1000_nodes_extended_resource_percentage_10": 100,
		"sched_ratio_vs_extended_resource_1000_nodes_percentage_10":     0.4,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if _, ok := got["points"]; !ok {
		t.Error("the details are missing beside the headline")
	}
}

func TestParse(t *testing.T) {
	if f, err := ParseFills("0.9, 0,0.5,0.5"); err != nil || !slices.Equal(f, []float64{0, 0.5, 0.9}) {
		t.Errorf("ParseFills = %v, %v", f, err)
	}
	for _, bad := range []string{"1", "-0.1", "half", ""} {
		if _, err := ParseFills(bad); err == nil || !strings.Contains(err.Error(), "fill level") {
			t.Errorf("ParseFills(%q) = %v, want an error naming the fill level", bad, err)
		}
	}
	if n, err := ParseNodes("100,1000"); err != nil || !slices.Equal(n, []int{100, 1000}) {
		t.Errorf("ParseNodes = %v, %v", n, err)
	}
	if _, err := ParseNodes("100,x,0"); err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), `"0"`) {
		t.Errorf("ParseNodes: %v, want both bad sizes named", err)
	}
}

func TestCPUSeconds(t *testing.T) {
	before, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for i := range 200_000_000 {
		x += i
	}
	after, err := cpuSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Errorf("CPU time did not grow over a busy loop (%d): %.2f s, then %.2f s", x, before, after)
	}
	if _, err := cpuSeconds(-1); err == nil {
		t.Error("no error for a missing process")
	}
}

// The node object's pods capacity must not limit the fill and the bursts.
func TestNodeRoom(t *testing.T) {
	node := nodeObject("n", testKinds(t)[0])
	if pods := node.Status.Allocatable[v1.ResourcePods]; pods.Value() < 1000 {
		t.Errorf("room for %d pods", pods.Value())
	}
}

func TestPodsFor(t *testing.T) {
	kinds := testKinds(t)
	var nodes []*simNode
	for i := range 3 {
		nodes = append(nodes, &simNode{name: nodeName(i), index: i, kind: kinds[i%len(kinds)]})
	}
	ports := 0
	for _, n := range nodes {
		ports += len(n.kind.inv.Ports)
	}
	for _, tc := range []struct {
		name               string
		s                  Scenario
		fill               float64
		burst, paced       int
		wantBurst, wantPac int
	}{
		{"shares are not limited", ScenarioShare, 0.9, 200, 50, 200, 50},
		{"whole ports fit", ScenarioWholePort, 0, ports - 5, 5, ports - 5, 5},
		{"whole ports limited", ScenarioWholePort, 0, 200, 50, ports * 3 / 4, ports - ports*3/4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, p := podsFor(tc.s, nodes, tc.fill, tc.burst, tc.paced)
			if b != tc.wantBurst || p != tc.wantPac {
				t.Errorf("podsFor = %d, %d; want %d, %d", b, p, tc.wantBurst, tc.wantPac)
			}
		})
	}
	// Taken ports are not room.
	half := 0
	for _, n := range nodes {
		half += wholePorts(n, 0.5)
	}
	if half >= ports || half == 0 {
		t.Errorf("%d whole ports free at fill 0.5 of %d", half, ports)
	}
	// 4 ports on one NUMA node: never more pods than ports/4, and at least one on a
	// profile with 4 ports on a NUMA node.
	numa := 0
	for _, n := range nodes {
		numa += ScenarioNUMA.perNode(n, 0)
	}
	if numa == 0 || numa > ports/4 {
		t.Errorf("%d NUMA-aligned pods fit on nodes with %d ports", numa, ports)
	}
}

func TestWritePlots(t *testing.T) {
	r := &Results{Points: []Point{
		{Nodes: 100, Scenario: "share", Model: ModelDefault, Fill: 0.5, PodsPerSec: 40},
		{Nodes: 100, Scenario: "extended-resource", Fill: 0.5, PodsPerSec: 200},
		{Nodes: 1000, Scenario: "share", Model: ModelDefault, Fill: 0.5, PodsPerSec: 9},
		{Nodes: 1000, Scenario: "whole-port", Model: ModelPerNIC, Fill: 0.5, PodsPerSec: 19},
		{Nodes: 1000, Scenario: "extended-resource", Fill: 0.5, PodsPerSec: 88},
		{Nodes: 1000, Scenario: "share", Model: ModelDefault, Fill: 0.5, PercentageOfNodesToScore: 10, PodsPerSec: 30},
		{Nodes: 1000, Scenario: "extended-resource", Fill: 0.5, PercentageOfNodesToScore: 10, PodsPerSec: 100},
	}}
	dir := t.TempDir()
	if err := WritePlots(r, dir); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][]string{
		ThroughputPlot: {"1000 nodes", "whole-port (per-nic)", "extended resource (device plugin)"},
		RatioPlot:      {"goal (0.5)", "scheduler: default", "percentageOfNodesToScore 10"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(strings.TrimSpace(string(data)), "<?xml") || !strings.Contains(string(data), "<svg") {
			t.Errorf("%s is not an SVG document", name)
		}
		for _, w := range want {
			if !strings.Contains(string(data), w) {
				t.Errorf("%s does not show %q", name, w)
			}
		}
	}
	if err := WritePlots(&Results{}, dir); err == nil {
		t.Error("no error for results without points")
	}
}

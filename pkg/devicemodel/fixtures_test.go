package devicemodel

import (
	"fmt"
	"strings"
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// ibPort is a fully known, ACTIVE InfiniBand port of a ConnectX-7.
func ibPort(ibdev string, port int) discovery.Port {
	return discovery.Port{
		IBDev: ibdev, Port: port,
		LinkLayer: discovery.LinkLayerInfiniBand, State: "ACTIVE", PhysState: "LinkUp",
		SpeedGbps: ptr.To(400), Rate: "400 Gb/sec (4X NDR)",
		Netdev: "ibp3s0", MTU: ptr.To(4096),
		NodeGUID: "7c8c:0903:00c3:cfee", FWVer: "28.44.2524", BoardID: "MT_0000000838", HCAType: "MT4129",
		Model: "ConnectX-7", VendorID: "15b3", DeviceID: "1021", Driver: "mlx5_core",
		PCIBusID: "0000:03:00.0", PCIeRoot: "pci0000:00", NUMANode: ptr.To(0),
	}
}

// rocePort is an ACTIVE RoCE port with GID index 3 behind bond0.
func rocePort(ibdev string, port int) discovery.Port {
	p := ibPort(ibdev, port)
	p.LinkLayer = discovery.LinkLayerEthernet
	p.Netdev, p.MTU, p.GIDIndex, p.LAG = "bond0", ptr.To(9000), ptr.To(3), true
	p.DeviceID, p.Model, p.SpeedGbps = "101d", "ConnectX-6 Dx", ptr.To(200)
	p.PCIBusID, p.PCIeRoot, p.NUMANode = "0000:1a:00.0", "pci0000:17", ptr.To(1)
	return p
}

// manyPorts is n IB ports, each its own RDMA device and PCI function, as on every mlx5
// adapter (and every node of the e2e suite and the scale runs): the layouts the tests
// expect are those of single-port RDMA devices. multiPortDevice makes the other kind.
func manyPorts(n int) []discovery.Port {
	ports := make([]discovery.Port, 0, n)
	for i := range n {
		p := ibPort(fmt.Sprintf("mlx5_%02d", i), 1)
		p.PCIBusID = fmt.Sprintf("0000:%02x:00.0", i+1)
		ports = append(ports, p)
	}
	return ports
}

func inventory(ports ...discovery.Port) *discovery.Inventory {
	return &discovery.Inventory{NetnsMode: discovery.NetnsModeShared, Ports: ports}
}

// checkInvariants asserts what must hold for every result, whatever the input: what
// the API server validates per slice, what the allocator checks across a pool, and
// what the plugin relies on (every published device is in Result.Devices).
func checkInvariants(t *testing.T, res *Result) {
	t.Helper()
	if len(res.Resources.Pools) != 1 {
		t.Fatalf("want exactly one pool, got %d", len(res.Resources.Pools))
	}
	pool, ok := res.Resources.Pools[res.PoolName]
	if !ok {
		t.Fatalf("pool %q missing", res.PoolName)
	}
	if len(pool.Slices) == 0 {
		t.Fatal("a pool needs at least one slice")
	}
	counterSets := map[string]resourceapi.CounterSet{}
	devices := map[string]bool{}
	for i, s := range pool.Slices {
		if len(s.Devices) > 0 && len(s.SharedCounters) > 0 {
			t.Errorf("slice %d has both devices and counters", i)
		}
		if len(s.SharedCounters) > resourceapi.ResourceSliceMaxCounterSets {
			t.Errorf("slice %d has %d counter sets", i, len(s.SharedCounters))
		}
		for _, cs := range s.SharedCounters {
			if _, dup := counterSets[cs.Name]; dup {
				t.Errorf("counter set %q twice in the pool", cs.Name)
			}
			counterSets[cs.Name] = cs
		}
		limit := resourceapi.ResourceSliceMaxDevices
		for _, d := range s.Devices {
			if len(d.Taints) > 0 || len(d.ConsumesCounters) > 0 {
				limit = resourceapi.ResourceSliceMaxDevicesWithAdvancedFeatures
			}
		}
		if len(s.Devices) > limit {
			t.Errorf("slice %d has %d devices, limit %d", i, len(s.Devices), limit)
		}
		for _, d := range s.Devices {
			if devices[d.Name] {
				t.Errorf("device %q twice in the pool", d.Name)
			}
			devices[d.Name] = true
			if msgs := validation.IsDNS1123Label(d.Name); len(msgs) > 0 {
				t.Errorf("device name %q: %v", d.Name, msgs)
			}
			if n := len(d.Attributes) + len(d.Capacity); n > resourceapi.ResourceSliceMaxAttributesAndCapacitiesPerDevice {
				t.Errorf("device %q has %d attributes and capacities", d.Name, n)
			}
			for name, a := range d.Attributes {
				if a.StringValue != nil && len(*a.StringValue) > resourceapi.DeviceAttributeMaxValueLength {
					t.Errorf("device %q attribute %s is %d bytes", d.Name, name, len(*a.StringValue))
				}
				if a.StringValue != nil && *a.StringValue == "" {
					t.Errorf("device %q attribute %s is empty: unknown facts must be omitted", d.Name, name)
				}
			}
			meta, ok := res.Devices[d.Name]
			if !ok {
				t.Errorf("published device %q is not in Result.Devices", d.Name)
			}
			if got := *attrOf(d, AttrMode).StringValue; got != string(meta.Mode) {
				t.Errorf("device %q: mode attribute %q, Result.Devices says %q", d.Name, got, meta.Mode)
			}
			for _, c := range d.ConsumesCounters {
				cs, ok := counterSets[c.CounterSet]
				if !ok {
					// Counter slices come first, so the set must be known by now.
					t.Errorf("device %q consumes unknown counter set %q", d.Name, c.CounterSet)
				}
				for name := range c.Counters {
					if _, ok := cs.Counters[name]; !ok {
						t.Errorf("device %q consumes unknown counter %q", d.Name, name)
					}
				}
			}
		}
	}
	for name, meta := range res.Devices {
		if !devices[name] {
			t.Errorf("Result.Devices has %q, which is not published", name)
		}
		wantKey := DeviceName(meta.Port.IBDev, meta.Port.Port)
		if meta.Mode == ModeLegacy {
			wantKey = name // a legacy device stands for several ports
			if len(meta.Ports) == 0 || meta.Port.IBDev != meta.Ports[0].IBDev || meta.Port.Port != meta.Ports[0].Port {
				t.Errorf("Result.Devices[%q]: Port %s/%d is not the first of Ports %v", name, meta.Port.IBDev, meta.Port.Port, meta.Ports)
			}
		}
		if meta.Name != name || meta.PortKey != wantKey {
			t.Errorf("Result.Devices[%q] = %+v is inconsistent", name, meta)
		}
	}
	for i, is := range res.Issues {
		if is.Reason == "" || (strings.TrimSpace(is.IBDev) == "" && is.LegacyResource == "") {
			t.Errorf("issue %d is incomplete: %+v", i, is)
		}
	}
	checkExclusive(t, res, counterSets)
}

// checkExclusive asserts that exclusive means exclusive for the scheduler: the ports of
// one RDMA device share its uverbs character device, so no device of the RDMA device may
// be allocated to another claim while an exclusive one is (whatever the port), and
// shared devices, of one port or of several, may all be allocated at once.
func checkExclusive(t *testing.T, res *Result, counterSets map[string]resourceapi.CounterSet) {
	t.Helper()
	byIBDev := map[string][]resourceapi.Device{}
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, d := range s.Devices {
			meta := res.Devices[d.Name]
			seen := map[string]bool{}
			// A legacy device is on every RDMA device of its ports.
			for _, p := range meta.AllPorts() {
				if !seen[p.IBDev] {
					seen[p.IBDev] = true
					byIBDev[p.IBDev] = append(byIBDev[p.IBDev], d)
				}
			}
		}
	}
	for _, ibdev := range sortedKeys(byIBDev) {
		devs := byIBDev[ibdev]
		for i, a := range devs {
			if !coAllocatable(counterSets, a) {
				t.Errorf("%s: device %s alone consumes more than its counter sets hold", ibdev, a.Name)
			}
			for _, b := range devs[i+1:] {
				exclusive := res.Devices[a.Name].Mode == ModeExclusive || res.Devices[b.Name].Mode == ModeExclusive
				if got := coAllocatable(counterSets, a, b); got == exclusive {
					t.Errorf("%s: devices %s and %s can be allocated to two claims at once: %v, want %v", ibdev, a.Name, b.Name, got, !exclusive)
				}
			}
		}
	}
}

// coAllocatable says whether the allocator can hand out all of devs, each to another
// claim, going by the counters they consume: it charges every allocated device's
// consumption once (a multi-allocatable device once however many shares are out) and
// admits no counter above its counter set's value (k8s.io/dynamic-resource-allocation
// structured, checkAvailableCounters).
func coAllocatable(counterSets map[string]resourceapi.CounterSet, devs ...resourceapi.Device) bool {
	type key struct{ set, counter string }
	consumed := map[key]apiresource.Quantity{}
	for _, d := range devs {
		for _, c := range d.ConsumesCounters {
			for name, v := range c.Counters {
				q := consumed[key{c.CounterSet, name}]
				q.Add(v.Value)
				consumed[key{c.CounterSet, name}] = q
			}
		}
	}
	for k, q := range consumed {
		if q.Cmp(counterSets[k.set].Counters[k.counter].Value) > 0 {
			return false
		}
	}
	return true
}

// deviceNames lists the devices of all slices in publication order.
func deviceNames(res *Result) []string {
	var names []string
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, d := range s.Devices {
			names = append(names, d.Name)
		}
	}
	return names
}

// device finds a published device by name.
func device(t *testing.T, res *Result, name string) resourceapi.Device {
	t.Helper()
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		for _, d := range s.Devices {
			if d.Name == name {
				return d
			}
		}
	}
	t.Fatalf("device %q not published; have %v", name, deviceNames(res))
	return resourceapi.Device{}
}

// layout describes the slices of a result: "c8" is a counter slice with 8 sets,
// "d64" a device slice with 64 devices.
func layout(res *Result) []string {
	var out []string
	for _, s := range res.Resources.Pools[res.PoolName].Slices {
		if len(s.SharedCounters) > 0 {
			out = append(out, fmt.Sprintf("c%d", len(s.SharedCounters)))
		} else {
			out = append(out, fmt.Sprintf("d%d", len(s.Devices)))
		}
	}
	return out
}

// testLogger logs through t.
func testLogger(t *testing.T) klog.Logger {
	return ktesting.NewLogger(t, ktesting.NewConfig())
}

// lookupAttr finds a published attribute by its fully qualified name, as consumers do.
func lookupAttr(d resourceapi.Device, name resourceapi.QualifiedName) (resourceapi.DeviceAttribute, bool) {
	return LookupAttribute(DefaultDriverName, &d, name)
}

// attrOf is lookupAttr for attributes the test expects to be there.
func attrOf(d resourceapi.Device, name resourceapi.QualifiedName) resourceapi.DeviceAttribute {
	v, _ := lookupAttr(d, name)
	return v
}

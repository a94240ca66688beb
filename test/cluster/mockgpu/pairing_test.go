package mockgpu_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/dynamic-resource-allocation/structured"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/apis/resource/install" // registers resource.k8s.io in legacyscheme
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/pkg/claimgen"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/nodeconfig"
	"github.com/rdma-dra/rdma-dra-driver/test/bench"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/localcluster"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mockgpu"
)

// repoRoot is the repository root seen from this package.
const repoRoot = "../../.."

// pairingNode is the node every pairing case allocates on.
const pairingNode = "node-a"

// pairingFeatures are the allocator features of a 1.37 scheduler with its default gates
// that the device model and claimgen's claims need: counters (partitionable devices),
// distinctAttribute and shares (consumable capacity), taints, and prioritized lists.
var pairingFeatures = structured.Features{
	ConsumableCapacity:   true,
	DeviceTaints:         true,
	PartitionableDevices: true,
	PrioritizedList:      true,
}

// publishedNode is a mock node profile written to disk and published by both drivers
// from that one tree, as on the local cluster.
type publishedNode struct {
	slices []*resourceapi.ResourceSlice
	// gpus are the mock GPU driver's GPUs, in bus order (gpu-<i>).
	gpus []mockgpu.GPU
	// rdma is the RDMA driver's model: each published device's port.
	rdma *devicemodel.Result
	// devices are all published devices by driver and name.
	devices map[structured.DeviceID]*resourceapi.Device
}

// publishNode writes the profile with pkg/mocknode and publishes it: the RDMA driver's
// slices from discovery of the tree and the device model with the node configuration's
// rails (as the plugin builds them in the default, partitionable model), the mock GPU
// driver's from its Discover and Resources.
func publishNode(t *testing.T, profile string, rails []nodeconfig.Rail) *publishedNode {
	t.Helper()
	dir := t.TempDir()
	if err := mocknode.WriteProfile(profile, dir, mocknode.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	sysRoot := filepath.Join(dir, mocknode.SysDir)
	_, ctx := ktesting.NewTestContext(t)
	inv, err := discovery.New(discovery.Options{SysfsRoot: sysRoot}).Discover(ctx)
	if err != nil {
		t.Fatalf("discover %s: %v", profile, err)
	}
	res, err := devicemodel.Build(inv, devicemodel.Options{NodeName: pairingNode, Config: nodeconfig.Config{Rails: rails}})
	if err != nil {
		t.Fatalf("device model of %s: %v", profile, err)
	}
	if len(res.Issues) > 0 {
		t.Fatalf("device model of %s: issues %+v", profile, res.Issues)
	}
	gpus, err := mockgpu.Discover(sysRoot)
	if err != nil {
		t.Fatalf("discover the GPUs of %s: %v", profile, err)
	}
	n := &publishedNode{gpus: gpus, rdma: res, devices: map[structured.DeviceID]*resourceapi.Device{}}
	n.slices = append(res.ResourceSlices(), driverSlices(mockgpu.DriverName, pairingNode, mockgpu.Resources(pairingNode, gpus))...)
	for _, s := range n.slices {
		for i := range s.Spec.Devices {
			n.devices[structured.MakeDeviceID(s.Spec.Driver, s.Spec.Pool.Name, s.Spec.Devices[i].Name)] = &s.Spec.Devices[i]
		}
	}
	return n
}

// driverSlices renders a driver's resources as the ResourceSlices that the kubeletplugin
// helper's controller publishes for node: each pool at generation 1, pools by name.
func driverSlices(driver, node string, res resourceslice.DriverResources) []*resourceapi.ResourceSlice {
	var out []*resourceapi.ResourceSlice
	for _, name := range slices.Sorted(maps.Keys(res.Pools)) {
		pool := res.Pools[name]
		for i, s := range pool.Slices {
			out = append(out, &resourceapi.ResourceSlice{
				ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%s-%d", driver, name, i)},
				Spec: resourceapi.ResourceSliceSpec{
					Driver:         driver,
					NodeName:       ptr.To(node),
					Pool:           resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: int64(len(pool.Slices))},
					Devices:        s.Devices,
					SharedCounters: s.SharedCounters,
				},
			})
		}
	}
	return out
}

// attr is the device's attribute name as the allocator reads it, "" when the device
// lacks it or it is not a string or an int.
func (n *publishedNode) attr(r resourceapi.DeviceRequestAllocationResult, name resourceapi.QualifiedName) string {
	d := n.devices[structured.MakeDeviceID(r.Driver, r.Pool, r.Device)]
	if d == nil {
		return ""
	}
	v, ok := devicemodel.LookupAttribute(r.Driver, d, name)
	switch {
	case !ok:
		return ""
	case v.StringValue != nil:
		return *v.StringValue
	case v.IntValue != nil:
		return strconv.FormatInt(*v.IntValue, 10)
	case v.BoolValue != nil:
		return strconv.FormatBool(*v.BoolValue)
	}
	return ""
}

// deviceClasses are the chart's default DeviceClasses (its RdmaPools, with the CEL the
// controller generates: bench.DeviceClasses) and the local cluster's mock GPU class, read
// from the manifest that installs the mock GPU driver.
func deviceClasses(t *testing.T) classLister {
	t.Helper()
	classes, err := bench.DeviceClasses(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	if classes[claimgen.DefaultNICClass] == nil {
		t.Fatalf("the chart has no DeviceClass %s", claimgen.DefaultNICClass)
	}
	manifest, err := localcluster.Layout{}.MockGPUManifest("/sys")
	if err != nil {
		t.Fatal(err)
	}
	for doc := range strings.SplitSeq(manifest, "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("decode the mock GPU manifest: %v", err)
		}
		if meta.Kind != "DeviceClass" {
			continue
		}
		var dc resourceapi.DeviceClass
		if err := yaml.UnmarshalStrict([]byte(doc), &dc); err != nil {
			t.Fatalf("decode the mock GPU DeviceClass: %v", err)
		}
		classes[dc.Name] = &dc
	}
	if classes[localcluster.MockGPUDeviceClass] == nil {
		t.Fatalf("the mock GPU manifest has no DeviceClass %s", localcluster.MockGPUDeviceClass)
	}
	return classes
}

// classLister serves DeviceClasses to the allocator.
type classLister map[string]*resourceapi.DeviceClass

func (c classLister) List() ([]*resourceapi.DeviceClass, error) {
	return slices.Collect(maps.Values(c)), nil
}

func (c classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := c[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

// pairs are the options of `rdma-dra claim --kind ResourceClaim --gpus <gpus> --align
// pcie --gpu-class gpu.mock.rdma.dra.io`, then edit's.
func pairs(gpus int, edit func(*claimgen.Options)) claimgen.Options {
	o := claimgen.Options{
		Kind: claimgen.KindClaim, Name: claimgen.DefaultName(gpus, gpus), GPUs: gpus, NICs: gpus,
		Align: claimgen.AlignPCIe, GPUClass: localcluster.MockGPUDeviceClass, NICClass: claimgen.DefaultNICClass,
	}
	if edit != nil {
		edit(&o)
	}
	return o
}

func distinctRails(o *claimgen.Options) { o.DistinctRails = true }

// buildClaim is claimgen's claim of o as the API server stores it: defaulted (claimgen
// leaves each request's allocation mode and count to the API's defaults), with a UID.
// With pin, each pair is tied to GPU i's root by CEL instead: gpu-i selects the GPU on
// gpus[i].PCIeRoot and nic-i a port whose attribute pin names that root, the claim that
// pairing ports by another attribute than pcieRoot would take.
func buildClaim(t *testing.T, o claimgen.Options, pin resourceapi.QualifiedName, gpus []mockgpu.GPU) *resourceapi.ResourceClaim {
	t.Helper()
	obj, err := claimgen.Build(o)
	if err != nil {
		t.Fatal(err)
	}
	claim := obj.(*resourceapi.ResourceClaim)
	legacyscheme.Scheme.Default(claim)
	claim.UID = types.UID("uid-" + claim.Name)
	if pin == "" {
		return claim
	}
	if o.Align != claimgen.AlignNone || o.GPUs != o.NICs || o.GPUs > len(gpus) {
		t.Fatalf("pin needs one NIC per GPU of the node and no alignment, got %+v", o)
	}
	requests := map[string]*resourceapi.ExactDeviceRequest{}
	for i := range claim.Spec.Devices.Requests {
		requests[claim.Spec.Devices.Requests[i].Name] = claim.Spec.Devices.Requests[i].Exactly
	}
	for k, gpu := range gpus[:o.GPUs] {
		for name, attr := range map[string]resourceapi.QualifiedName{
			claimgen.GPURequest(k): deviceattribute.StandardDeviceAttributePCIeRoot,
			claimgen.NICRequest(k): pin,
		} {
			r := requests[name]
			if r == nil {
				t.Fatalf("claim %s has no request %s", claim.Name, name)
			}
			r.Selectors = append(r.Selectors, resourceapi.DeviceSelector{CEL: &resourceapi.CELDeviceSelector{Expression: attrEquals(attr, gpu.PCIeRoot)}})
		}
	}
	return claim
}

// attrEquals is CEL that a device's string attribute name is value; a device without it
// does not match (reading a missing attribute would abort the allocation instead).
func attrEquals(name resourceapi.QualifiedName, value string) string {
	domain, id, _ := strings.Cut(string(name), "/")
	return fmt.Sprintf("device.attributes[%q].?%s.orValue(\"\") == %q", domain, id, value)
}

// allocated is the state of the node after results were allocated: what the scheduler's
// claim tracker records for an allocated claim.
func allocated(results []resourceapi.DeviceRequestAllocationResult) structured.AllocatedState {
	s := structured.AllocatedState{
		AllocatedDevices:         sets.New[structured.DeviceID](),
		AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
		AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
	}
	for _, r := range results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID == nil {
			s.AllocatedDevices.Insert(id)
			continue
		}
		s.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, r.ShareID))
		s.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id, r.ConsumedCapacity))
	}
	return s
}

// allocate runs the scheduler's allocator for claim on the node with inUse taken; nil
// when the node cannot satisfy the claim.
func allocate(t *testing.T, n *publishedNode, classes classLister, inUse []resourceapi.DeviceRequestAllocationResult, claim *resourceapi.ResourceClaim) []resourceapi.DeviceRequestAllocationResult {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	alloc, err := structured.NewAllocator(ctx, pairingFeatures, allocated(inUse), classes, n.slices,
		cel.NewCache(10, cel.Features{EnableConsumableCapacity: true}))
	if err != nil {
		t.Fatalf("new allocator: %v", err)
	}
	results, err := alloc.Allocate(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: pairingNode}}, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatalf("allocate %s: %v", claim.Name, err)
	}
	if len(results) == 0 {
		return nil
	}
	return results[0].Devices.Results
}

// The mock nodes of the pairing cases.
const (
	dgxH100 = "dgx-h100"
	gb300   = "gb300"
)

// TestGPUNICPairing runs claims of `rdma-dra claim` through the scheduler's own allocator
// on the dgx-h100 and gb300 mock nodes, as both drivers publish them from the same tree:
// each GPU gets a whole port below its root complex (on gb300 the root of the port's Data
// Direct function, not of its netdev), on distinct rails when asked, with the GPUDirect
// mode asked for, and a claim the node cannot satisfy is not allocated rather than
// allocated wrongly. docs/device-model.md ("What is proven where") points here.
func TestGPUNICPairing(t *testing.T) {
	classes := deviceClasses(t)
	nodes := map[string]*publishedNode{
		// The local cluster's node configuration: mlx5_<i> is on rail i.
		dgxH100: publishNode(t, dgxH100, localcluster.Rails()),
		gb300:   publishNode(t, gb300, nil),
	}
	eightOnRails := pairs(8, distinctRails)
	tests := []struct {
		name    string
		profile string
		opts    claimgen.Options
		// pin ties each pair by CEL on this attribute of the NIC (buildClaim).
		pin resourceapi.QualifiedName
		// prior is allocated first and what it got is in use: all of it, or with
		// priorNICsOnly only its ports.
		prior         *claimgen.Options
		priorNICsOnly bool
		fails         bool
		// never are RDMA devices that no NIC may get.
		never []string
		// dataDirect: every NIC has a Data Direct function; otherwise none has.
		dataDirect bool
	}{
		{name: "dgx-h100: 8 pairs on distinct rails", profile: dgxH100, opts: eightOnRails, never: []string{"mlx5_8", "mlx5_9"}},
		{name: "dgx-h100: 1 pair on a free node", profile: dgxH100, opts: pairs(1, distinctRails)},
		{name: "dgx-h100: 1 pair after 8: no GPU, no rail left", profile: dgxH100, opts: pairs(1, distinctRails), prior: &eightOnRails, fails: true},
		{name: "dgx-h100: 1 pair after 8 ports: no rail left", profile: dgxH100, opts: pairs(1, distinctRails), prior: &eightOnRails, priorNICsOnly: true, fails: true},
		{name: "dgx-h100: 8 pairs with dmabuf: the node has peermem", profile: dgxH100,
			opts: pairs(8, func(o *claimgen.Options) { o.GPUDirect = claimgen.GPUDirectDMABuf }), fails: true},
		{name: "dgx-h100: 8 pairs with peermem", profile: dgxH100,
			opts: pairs(8, func(o *claimgen.Options) { o.GPUDirect = claimgen.GPUDirectPeermem }), never: []string{"mlx5_8", "mlx5_9"}},
		{name: "gb300: 4 pairs on Data Direct roots", profile: gb300, opts: pairs(4, nil), dataDirect: true},
		{name: "gb300: 4 pairs with dmabuf", profile: gb300,
			opts: pairs(4, func(o *claimgen.Options) { o.GPUDirect = claimgen.GPUDirectDMABuf }), dataDirect: true},
		{name: "gb300: 4 pairs pinned by pcieRoot", profile: gb300,
			opts: pairs(4, func(o *claimgen.Options) { o.Align = claimgen.AlignNone }), pin: deviceattribute.StandardDeviceAttributePCIeRoot, dataDirect: true},
		{name: "gb300: 4 pairs pinned by netdev_pcie_root: no netdev is on a GPU's root", profile: gb300,
			opts: pairs(4, func(o *claimgen.Options) { o.Align = claimgen.AlignNone }), pin: devicemodel.AttrNetdevPCIeRoot, fails: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := nodes[tt.profile]
			var inUse []resourceapi.DeviceRequestAllocationResult
			if tt.prior != nil {
				prior := allocate(t, n, classes, nil, buildClaim(t, *tt.prior, "", n.gpus))
				if prior == nil {
					t.Fatalf("the prior claim %s was not allocated", tt.prior.Name)
				}
				for _, r := range prior {
					if !tt.priorNICsOnly || r.Driver == devicemodel.DefaultDriverName {
						inUse = append(inUse, r)
					}
				}
			}
			claim := buildClaim(t, tt.opts, tt.pin, n.gpus)
			got := allocate(t, n, classes, inUse, claim)
			if tt.fails {
				if got != nil {
					t.Fatalf("allocated %s, want no allocation", describe(got))
				}
				return
			}
			if got == nil {
				t.Fatal("not allocated")
			}
			checkPairs(t, n, tt.opts, tt.pin != "", got)
			checkNICs(t, n, tt.opts, tt.never, tt.dataDirect, got)
		})
	}
}

// checkPairs checks that every request got one device of its driver, that with an
// alignment (or pinned pairs) each NIC shares the root complex of its GPUs, every pair
// on a root of its own, and that with DistinctRails every NIC is on a rail of its own.
func checkPairs(t *testing.T, n *publishedNode, o claimgen.Options, pinned bool, got []resourceapi.DeviceRequestAllocationResult) {
	t.Helper()
	byRequest := map[string]resourceapi.DeviceRequestAllocationResult{}
	for _, r := range got {
		if _, dup := byRequest[r.Request]; dup {
			t.Errorf("request %s got two devices", r.Request)
		}
		byRequest[r.Request] = r
	}
	if len(byRequest) != o.GPUs+o.NICs {
		t.Fatalf("allocated %s, want %d devices", describe(got), o.GPUs+o.NICs)
	}
	for i := range o.GPUs {
		if r := byRequest[claimgen.GPURequest(i)]; r.Driver != mockgpu.DriverName {
			t.Errorf("%s got %s/%s, not a GPU", r.Request, r.Driver, r.Device)
		}
	}
	for i := range o.NICs {
		if r := byRequest[claimgen.NICRequest(i)]; r.Driver != devicemodel.DefaultDriverName {
			t.Errorf("%s got %s/%s, not an RDMA port", r.Request, r.Driver, r.Device)
		}
	}
	if o.Align == claimgen.AlignPCIe || pinned {
		perNIC := o.GPUs / o.NICs
		roots := sets.New[string]()
		for i := range o.NICs {
			nic := byRequest[claimgen.NICRequest(i)]
			root := n.attr(nic, deviceattribute.StandardDeviceAttributePCIeRoot)
			if root == "" {
				t.Errorf("%s (%s) has no pcieRoot", nic.Request, nic.Device)
			}
			roots.Insert(root)
			for g := i * perNIC; g < (i+1)*perNIC; g++ {
				gpu := byRequest[claimgen.GPURequest(g)]
				if got := n.attr(gpu, deviceattribute.StandardDeviceAttributePCIeRoot); got != root {
					t.Errorf("%s (%s) is on %s, %s (%s) on %q", nic.Request, nic.Device, root, gpu.Request, gpu.Device, got)
				}
			}
		}
		if roots.Len() != o.NICs {
			t.Errorf("the pairs are on roots %v, want %d distinct", sets.List(roots), o.NICs)
		}
	}
	if o.DistinctRails {
		rails := sets.New[string]()
		for i := range o.NICs {
			nic := byRequest[claimgen.NICRequest(i)]
			rail := n.attr(nic, devicemodel.AttrRail)
			if rail == "" || rails.Has(rail) {
				t.Errorf("%s (%s) is on rail %q, taken or none", nic.Request, nic.Device, rail)
			}
			rails.Insert(rail)
		}
	}
}

// checkNICs checks each allocated port: a whole port (the exclusive device), none of
// never, the GPUDirect mode asked for, and with dataDirect a pcieRoot that is its Data
// Direct function's root and not its netdev's (netdev_pcie_root); without, neither
// attribute of Data Direct.
func checkNICs(t *testing.T, n *publishedNode, o claimgen.Options, never []string, dataDirect bool, got []resourceapi.DeviceRequestAllocationResult) {
	t.Helper()
	for _, r := range got {
		if r.Driver != devicemodel.DefaultDriverName {
			continue
		}
		dev, ok := n.rdma.Devices[r.Device]
		if !ok {
			t.Errorf("%s got %s, which the device model did not publish", r.Request, r.Device)
			continue
		}
		if dev.Mode != devicemodel.ModeExclusive {
			t.Errorf("%s got %s, mode %s: not a whole port", r.Request, r.Device, dev.Mode)
		}
		if slices.Contains(never, dev.Port.IBDev) {
			t.Errorf("%s got %s, port of %s", r.Request, r.Device, dev.Port.IBDev)
		}
		if o.GPUDirect != "" {
			if got := n.attr(r, devicemodel.AttrGPUDirect); got != string(o.GPUDirect) {
				t.Errorf("%s got %s, gpudirect %q, want %q", r.Request, r.Device, got, o.GPUDirect)
			}
		}
		root := n.attr(r, deviceattribute.StandardDeviceAttributePCIeRoot)
		netdevRoot := n.attr(r, devicemodel.AttrNetdevPCIeRoot)
		dd := n.attr(r, devicemodel.AttrDataDirect)
		if !dataDirect {
			if dd != "" || netdevRoot != "" || root != dev.Port.PCIeRoot {
				t.Errorf("%s got %s: data_direct %q, netdev_pcie_root %q, pcieRoot %s; want none, none, its own %s",
					r.Request, r.Device, dd, netdevRoot, root, dev.Port.PCIeRoot)
			}
			continue
		}
		switch {
		case dd != "true" || dev.Port.DataDirectPCIeRoot == "":
			t.Errorf("%s got %s, which has no Data Direct function (data_direct %q)", r.Request, r.Device, dd)
		case root != dev.Port.DataDirectPCIeRoot:
			t.Errorf("%s got %s on pcieRoot %s, want its Data Direct function's %s", r.Request, r.Device, root, dev.Port.DataDirectPCIeRoot)
		case netdevRoot != dev.Port.PCIeRoot || netdevRoot == root:
			t.Errorf("%s got %s: netdev_pcie_root %q, want its PF's %s, not pcieRoot %s", r.Request, r.Device, netdevRoot, dev.Port.PCIeRoot, root)
		}
	}
}

// describe lists the allocated devices by request, in order.
func describe(rs []resourceapi.DeviceRequestAllocationResult) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Request + "=" + r.Device
	}
	return strings.Join(out, " ")
}

package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/dynamic-resource-allocation/structured"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
)

// allocFeatures are the allocator features of a 1.37 scheduler with its default gates:
// what the default model needs (partitionable devices, consumable capacity, taints) and
// the rest that is on by default. They select the same allocator for every variant.
var allocFeatures = structured.Features{
	AdminAccess:            true,
	ConsumableCapacity:     true,
	DeviceBindingAndStatus: true,
	DeviceTaints:           true,
	PartitionableDevices:   true,
	PrioritizedList:        true,
}

// Fill is the share of the cluster's capacity that is allocated before pods are timed.
const Fill = 0.8

// Cluster is a cluster of identical nodes for the allocator: their slices, which shares
// or devices are taken, and what the scheduler keeps between pods.
type Cluster struct {
	Variant Variant
	Nodes   []*v1.Node
	Slices  []*resourceapi.ResourceSlice
	State   structured.AllocatedState
	classes classLister
	cel     *cel.Cache
	// next is where the next pod's node search starts, as the scheduler rotates it.
	next int
	pods int
}

// newCluster builds n nodes with the inventory's ports published in variant v, and
// allocates fill of their capacity with one-share claims spread at random (seeded, so
// every run starts from the same state).
func newCluster(inv *discovery.Inventory, v Variant, n int, fill float64, classes map[string]*resourceapi.DeviceClass) (*Cluster, error) {
	c := &Cluster{
		Variant: v,
		classes: classLister(classes),
		cel:     cel.NewCache(10, cel.Features{}),
		State: structured.AllocatedState{
			AllocatedDevices:         sets.New[structured.DeviceID](),
			AllocatedSharedDeviceIDs: sets.New[structured.SharedDeviceID](),
			AggregatedCapacity:       structured.NewConsumedCapacityCollection(),
		},
	}
	// units are what one-share claims take: a share of a shared device (default model)
	// or a single-share device (legacy).
	type unit struct {
		id   structured.DeviceID
		free int
	}
	var units []unit
	total := 0
	for i := range n {
		name := fmt.Sprintf("node-%04d", i)
		c.Nodes = append(c.Nodes, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		slices, res, err := v.build(inv, name)
		if err != nil {
			return nil, err
		}
		c.Slices = append(c.Slices, slices...)
		for _, dev := range sortedDevices(res) {
			if dev.Mode != devicemodel.ModeShared {
				continue
			}
			units = append(units, unit{id: structured.MakeDeviceID(res.DriverName, res.PoolName, dev.Name), free: dev.MaxShares})
			total += dev.MaxShares
		}
	}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(v.Shares)))
	for taken := 0; taken < int(fill*float64(total)); {
		u := &units[rng.IntN(len(units))]
		if u.free == 0 {
			continue
		}
		u.free--
		taken++
		if v.Legacy {
			c.State.AllocatedDevices.Insert(u.id)
			continue
		}
		c.takeShare(u.id, types.UID(fmt.Sprintf("fill-%d", taken)))
	}
	return c, nil
}

// takeShare records one share of a shared device as allocated, as the scheduler's
// claim tracker does for an allocated claim.
func (c *Cluster) takeShare(id structured.DeviceID, share types.UID) {
	c.State.AllocatedSharedDeviceIDs.Insert(structured.MakeSharedDeviceID(id, &share))
	c.State.AggregatedCapacity.Insert(structured.NewDeviceConsumedCapacity(id,
		map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: *apiresource.NewQuantity(1, apiresource.DecimalSI)}))
}

// sortedDevices lists a result's devices in a stable order.
func sortedDevices(res *devicemodel.Result) []devicemodel.Device {
	out := make([]devicemodel.Device, 0, len(res.Devices))
	for _, s := range res.ResourceSlices() {
		for _, d := range s.Spec.Devices {
			out = append(out, res.Devices[d.Name])
		}
	}
	return out
}

// oneShareClaim is a pod's claim: one device of the shared class, which in the default
// model is one share (the capacity's default request).
func oneShareClaim(i int) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: fmt.Sprintf("pod-%d-rdma", i), UID: types.UID(fmt.Sprintf("claim-%d", i))},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "rdma",
			Exactly: &resourceapi.ExactDeviceRequest{
				DeviceClassName: sharedClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1,
			},
		}}}},
	}
}

// feasibleNodesToFind is how many feasible nodes the scheduler looks for before it
// stops filtering, with its default percentageOfNodesToScore (adaptive).
func feasibleNodesToFind(nodes int) int {
	const minFeasible, minPercentage = 100, 5
	if nodes < minFeasible {
		return nodes
	}
	pct := max(50-nodes/125, minPercentage)
	return max(nodes*pct/100, minFeasible)
}

// PodTiming is what scheduling one pod cost, on one core.
type PodTiming struct {
	// Total is Snapshot + Build + Filter.
	Total time.Duration
	// Snapshot is the copy of the allocated state the scheduler takes per pod.
	Snapshot time.Duration
	// Build is structured.NewAllocator over all slices.
	Build time.Duration
	// Filter is the Allocate calls until enough feasible nodes were found.
	Filter time.Duration
	// Calls is the number of Allocate calls (nodes tried).
	Calls int
}

// schedulePod does the DRA part of scheduling one pod the way the scheduler does it:
// snapshot the allocated state, build an allocator over all slices (PreFilter), call
// Allocate node by node from a rotating start until enough feasible nodes are found
// (Filter; the scheduler spreads these calls over 16 goroutines, here they run on one),
// then commit the first feasible node's result (Reserve).
func (c *Cluster) schedulePod(ctx context.Context) (PodTiming, error) {
	claim := oneShareClaim(c.pods)
	c.pods++
	start := time.Now()
	state := structured.AllocatedState{
		AllocatedDevices:         c.State.AllocatedDevices.Clone(),
		AllocatedSharedDeviceIDs: c.State.AllocatedSharedDeviceIDs.Clone(),
		AggregatedCapacity:       c.State.AggregatedCapacity.Clone(),
	}
	snapshot := time.Now()
	alloc, err := structured.NewAllocator(ctx, allocFeatures, state, c.classes, c.Slices, c.cel)
	if err != nil {
		return PodTiming{}, fmt.Errorf("new allocator: %w", err)
	}
	built := time.Now()
	want := feasibleNodesToFind(len(c.Nodes))
	var first []resourceapi.AllocationResult
	feasible, calls := 0, 0
	for i := 0; i < len(c.Nodes) && feasible < want; i++ {
		node := c.Nodes[(c.next+i)%len(c.Nodes)]
		calls++
		res, err := alloc.Allocate(ctx, node, []*resourceapi.ResourceClaim{claim})
		if err != nil {
			return PodTiming{}, fmt.Errorf("allocate on %s: %w", node.Name, err)
		}
		if res != nil {
			feasible++
			if first == nil {
				first = res
			}
		}
	}
	end := time.Now()
	t := PodTiming{Total: end.Sub(start), Snapshot: snapshot.Sub(start), Build: built.Sub(snapshot), Filter: end.Sub(built), Calls: calls}
	c.next = (c.next + calls) % len(c.Nodes)
	if first == nil {
		return PodTiming{}, fmt.Errorf("no node fits pod %d of %s", c.pods, c.Variant.Name)
	}
	for _, r := range first[0].Devices.Results {
		id := structured.MakeDeviceID(r.Driver, r.Pool, r.Device)
		if r.ShareID != nil {
			c.takeShare(id, *r.ShareID)
		} else {
			c.State.AllocatedDevices.Insert(id)
		}
	}
	return t, nil
}

// AllocPoint is the allocation time per pod of one cluster.
type AllocPoint struct {
	Variant Variant `json:"variant"`
	Nodes   int     `json:"nodes"`
	Pods    int     `json:"pods"`
	// PerPod is the allocation time per pod, in milliseconds.
	PerPod Summary `json:"per_pod"`
	// NodesTried is the mean number of Allocate calls per pod.
	NodesTried float64 `json:"nodes_tried"`
	// PerNodeUS is the mean time of one Allocate call, in microseconds.
	PerNodeUS float64 `json:"per_node_us"`
	// SnapshotMS, BuildMS and FilterMS split the mean per-pod time.
	SnapshotMS float64 `json:"snapshot_ms"`
	BuildMS    float64 `json:"build_ms"`
	FilterMS   float64 `json:"filter_ms"`
}

// measureAlloc builds a cluster and schedules pods until both minPods and minTime are
// reached.
func measureAlloc(ctx context.Context, inv *discovery.Inventory, v Variant, nodes, minPods int, minTime time.Duration, classes map[string]*resourceapi.DeviceClass) (AllocPoint, error) {
	c, err := newCluster(inv, v, nodes, Fill, classes)
	if err != nil {
		return AllocPoint{}, err
	}
	// One pod to warm up the CEL cache, as a running scheduler has it warm.
	if _, err := c.schedulePod(ctx); err != nil {
		return AllocPoint{}, err
	}
	var samples []time.Duration
	var sum PodTiming
	start := time.Now()
	for len(samples) < minPods || time.Since(start) < minTime {
		t, err := c.schedulePod(ctx)
		if err != nil {
			return AllocPoint{}, err
		}
		samples = append(samples, t.Total)
		sum.Snapshot += t.Snapshot
		sum.Build += t.Build
		sum.Filter += t.Filter
		sum.Calls += t.Calls
	}
	pods := time.Duration(len(samples))
	return AllocPoint{
		Variant: v, Nodes: nodes, Pods: len(samples), PerPod: Summarize(samples),
		NodesTried: float64(sum.Calls) / float64(len(samples)),
		PerNodeUS:  float64(sum.Filter.Microseconds()) / float64(sum.Calls),
		SnapshotMS: ms(sum.Snapshot / pods), BuildMS: ms(sum.Build / pods), FilterMS: ms(sum.Filter / pods),
	}, nil
}

// classLister serves DeviceClasses from a map.
type classLister map[string]*resourceapi.DeviceClass

func (l classLister) List() ([]*resourceapi.DeviceClass, error) {
	out := make([]*resourceapi.DeviceClass, 0, len(l))
	for _, dc := range l {
		out = append(out, dc)
	}
	return out, nil
}

func (l classLister) Get(name string) (*resourceapi.DeviceClass, error) {
	if dc, ok := l[name]; ok {
		return dc, nil
	}
	return nil, fmt.Errorf("device class %q not found", name)
}

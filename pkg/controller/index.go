package controller

import (
	"context"
	"slices"
	"sync"

	resourceapi "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/sets"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/klog/v2"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// index is the driver's published devices and their allocations, kept up to date by the
// informers' event handlers, and what each pool's selector selects of them. A sync
// counts a pool from it without listing or converting anything, and an event says which
// pools it can change: those that select a device on a port the event touches.
//
// Invariants (under mu): slices holds every ResourceSlice of the driver, each generation;
// only the newest generation of a resource pool is visible, as in the scheduler. consumed
// and results are the sums over claims of their allocation results, whatever the device.
// A selection's matches hold entries only for indexed slices: replacing or deleting a
// slice drops its entries.
type index struct {
	driverName string

	mu sync.Mutex
	// slices are the driver's slices by resource pool, then by name; poolOf names the
	// resource pool of each slice.
	slices map[string]map[string]*indexedSlice
	poolOf map[string]string
	// claims are the driver's allocation results of each claim, by namespace/name.
	claims map[string][]allocation
	// consumed is the shares (or 1) allocated per device; results counts the
	// allocation results per device, so that a result of zero shares still marks its
	// port busy.
	consumed map[deviceKey]int64
	results  map[deviceKey]int
	// selections are the selectors the pools were last counted with, by RdmaPool name.
	// A pool without one has no usage to keep (no class of its own) and is never
	// enqueued by slice or claim events.
	selections map[string]*selection
}

// indexedSlice is one ResourceSlice of the driver, converted once.
type indexedSlice struct {
	pool       string
	generation int64
	devices    []publishedDevice
}

// allocation is one allocation result of the driver.
type allocation struct {
	key    deviceKey
	amount int64
}

// selection is a pool's compiled selector and the devices it selects.
type selection struct {
	mode    v1alpha1.PoolMode
	program dracel.CompilationResult
	// matches are the indices of the devices of a slice that program selects; filled
	// when first needed.
	matches map[*indexedSlice][]int
}

func newIndex(driverName string) *index {
	return &index{
		driverName: driverName,
		slices:     map[string]map[string]*indexedSlice{},
		poolOf:     map[string]string{},
		claims:     map[string][]allocation{},
		consumed:   map[deviceKey]int64{},
		results:    map[deviceKey]int{},
		selections: map[string]*selection{},
	}
}

// updateSlice indexes the slice called name as s, or removes it when s is nil or another
// driver's, and returns the pools whose counts this can change: those whose selector
// selects a device on a port whose devices were added, removed or changed, before or
// after. A new generation of a resource pool hides or reveals all its other slices, so
// then every port of the resource pool counts as changed.
func (idx *index) updateSlice(ctx context.Context, name string, s *resourceapi.ResourceSlice) sets.Set[string] {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	var next *indexedSlice
	if s != nil && s.Spec.Driver == idx.driverName {
		next = newIndexedSlice(idx.driverName, s)
	}
	prevPool, hadPrev := idx.poolOf[name]
	var prev *indexedSlice
	var touched []string
	if hadPrev {
		prev = idx.slices[prevPool][name]
		touched = append(touched, prevPool)
	}
	if next != nil && !slices.Contains(touched, next.pool) {
		touched = append(touched, next.pool)
	}
	before := make([][]*indexedSlice, len(touched))
	newestBefore := make([]int64, len(touched))
	for i, p := range touched {
		before[i], newestBefore[i] = idx.visible(p)
	}

	if hadPrev {
		delete(idx.slices[prevPool], name)
		if len(idx.slices[prevPool]) == 0 {
			delete(idx.slices, prevPool)
		}
		delete(idx.poolOf, name)
	}
	if next != nil {
		if idx.slices[next.pool] == nil {
			idx.slices[next.pool] = map[string]*indexedSlice{}
		}
		idx.slices[next.pool][name] = next
		idx.poolOf[name] = next.pool
	}

	after := make([][]*indexedSlice, len(touched))
	newestAfter := make([]int64, len(touched))
	for i, p := range touched {
		after[i], newestAfter[i] = idx.visible(p)
	}
	var ports sets.Set[portKey] // nil: every port
	if len(touched) == 1 && newestBefore[0] == newestAfter[0] {
		// Only this slice changed what counts: the devices it had or has at the
		// generation that is visible.
		var counted, counts *indexedSlice
		if prev != nil && prev.generation == newestAfter[0] {
			counted = prev
		}
		if next != nil && next.generation == newestAfter[0] {
			counts = next
		}
		ports = changedPorts(counted, counts)
	}
	affected := sets.New[string]()
	for i := range touched {
		idx.selecting(ctx, before[i], ports, affected)
	}
	if prev != nil {
		for _, sel := range idx.selections {
			delete(sel.matches, prev)
		}
	}
	for i := range touched {
		idx.selecting(ctx, after[i], ports, affected)
	}
	return affected
}

// changedPorts returns the ports of the devices that are in only one of the two slices
// (either may be nil) or differ between them.
func changedPorts(prev, next *indexedSlice) sets.Set[portKey] {
	out := sets.New[portKey]()
	old := map[string]*publishedDevice{}
	if prev != nil {
		for i := range prev.devices {
			old[prev.devices[i].key.device] = &prev.devices[i]
		}
	}
	if next != nil {
		for i := range next.devices {
			d := &next.devices[i]
			o, ok := old[d.key.device]
			delete(old, d.key.device)
			if ok && o.node == d.node && apiequality.Semantic.DeepEqual(o.raw, d.raw) {
				continue
			}
			out.Insert(d.port)
			if ok {
				out.Insert(o.port)
			}
		}
	}
	for _, o := range old {
		out.Insert(o.port)
	}
	return out
}

// updateClaim indexes the allocation results of the claim with key, or removes them when
// claim is nil, and returns the pools whose counts this can change: those whose selector
// selects a device on the port of a device whose allocations changed. A claim's other
// changes (reservations, status.devices, metadata) change nothing. Which DeviceClass
// the claim asked for does not matter: a device counts in every pool that selects it.
func (idx *index) updateClaim(ctx context.Context, key string, claim *resourceapi.ResourceClaim) sets.Set[string] {
	next := idx.allocations(claim)
	idx.mu.Lock()
	defer idx.mu.Unlock()
	prev := idx.claims[key]
	if slices.Equal(prev, next) {
		return nil
	}
	for _, a := range prev {
		idx.add(a, -1)
	}
	for _, a := range next {
		idx.add(a, 1)
	}
	if len(next) == 0 {
		delete(idx.claims, key)
	} else {
		idx.claims[key] = next
	}
	before, after := tallies(prev), tallies(next)
	affected := sets.New[string]()
	for _, t := range []map[deviceKey]tally{before, after} {
		for key := range t {
			if before[key] == after[key] || affected.Len() == len(idx.selections) {
				continue
			}
			vis, _ := idx.visible(key.pool)
			if port, ok := findPort(vis, key); ok {
				idx.selecting(ctx, vis, sets.New(port), affected)
			}
			// Otherwise it is allocated from a slice that is gone or not yet seen and
			// counts nowhere.
		}
	}
	return affected
}

// tally is what the allocation results of one device add up to.
type tally struct {
	results int
	amount  int64
}

func tallies(as []allocation) map[deviceKey]tally {
	out := make(map[deviceKey]tally, len(as))
	for _, a := range as {
		t := out[a.key]
		t.results++
		t.amount += a.amount
		out[a.key] = t
	}
	return out
}

// add adds (sign 1) or removes (sign -1) one allocation result from the sums.
func (idx *index) add(a allocation, sign int) {
	idx.consumed[a.key] += int64(sign) * a.amount
	idx.results[a.key] += sign
	if idx.results[a.key] <= 0 {
		delete(idx.results, a.key)
		delete(idx.consumed, a.key)
	}
}

// allocations returns the driver's allocation results of claim, nil when it has none.
func (idx *index) allocations(claim *resourceapi.ResourceClaim) []allocation {
	if claim == nil || claim.Status.Allocation == nil {
		return nil
	}
	var out []allocation
	for _, r := range claim.Status.Allocation.Devices.Results {
		if r.Driver != idx.driverName {
			continue
		}
		amount := int64(1)
		if q, ok := r.ConsumedCapacity[devicemodel.SharesCapacity]; ok {
			amount = q.Value()
		}
		out = append(out, allocation{key: deviceKey{pool: r.Pool, device: r.Device}, amount: amount})
	}
	return out
}

// findPort returns the port of the device key names among the visible slices.
func findPort(vis []*indexedSlice, key deviceKey) (portKey, bool) {
	for _, s := range vis {
		for i := range s.devices {
			if s.devices[i].key == key {
				return s.devices[i].port, true
			}
		}
	}
	return portKey{}, false
}

// visible returns the slices of the resource pool's newest generation, and that
// generation.
func (idx *index) visible(pool string) ([]*indexedSlice, int64) {
	var newest int64
	for _, s := range idx.slices[pool] {
		newest = max(newest, s.generation)
	}
	var out []*indexedSlice
	for _, s := range idx.slices[pool] {
		if s.generation == newest {
			out = append(out, s)
		}
	}
	return out, newest
}

// selecting adds to into the pools whose selection selects a device of the slices, on
// one of ports unless it is nil.
func (idx *index) selecting(ctx context.Context, vis []*indexedSlice, ports sets.Set[portKey], into sets.Set[string]) {
	if ports != nil && ports.Len() == 0 {
		return
	}
	for name, sel := range idx.selections {
		if into.Has(name) {
			continue
		}
	slices:
		for _, s := range vis {
			for _, i := range sel.matchesOf(ctx, name, s) {
				if ports == nil || ports.Has(s.devices[i].port) {
					into.Insert(name)
					break slices
				}
			}
		}
	}
}

// matchesOf returns the indices of the devices of s that the selection selects. A
// device the selector cannot be evaluated on is skipped and logged: the scheduler would
// fail on it as well, and the count should not hide the rest.
func (sel *selection) matchesOf(ctx context.Context, pool string, s *indexedSlice) []int {
	if m, ok := sel.matches[s]; ok {
		return m
	}
	m := []int{}
	for i := range s.devices {
		d := &s.devices[i]
		ok, _, err := sel.program.DeviceMatches(ctx, d.cel)
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Pool selector fails on a device", "rdmaPool", pool,
				"resourcePool", d.key.pool, "device", d.key.device, "err", err)
			continue
		}
		if ok {
			m = append(m, i)
		}
	}
	sel.matches[s] = m
	return m
}

// forget drops the pool's selection: it has no class of its own to count.
func (idx *index) forget(pool string) {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	delete(idx.selections, pool)
}

// usage records program as the pool's selector, so that events from now on enqueue the
// pool when they change what it counts, and counts the pool with it.
func (idx *index) usage(ctx context.Context, pool string, mode v1alpha1.PoolMode, program dracel.CompilationResult) Usage {
	idx.mu.Lock()
	defer idx.mu.Unlock()
	sel := idx.selections[pool]
	if sel == nil || sel.mode != mode || sel.program.Expression != program.Expression {
		sel = &selection{mode: mode, program: program, matches: map[*indexedSlice][]int{}}
		idx.selections[pool] = sel
	}
	var c counter
	for p := range idx.slices {
		vis, _ := idx.visible(p)
		c.addResourcePool(ctx, idx, pool, sel, vis)
	}
	return c.usage(mode)
}

// newIndexedSlice converts the devices of a slice of the driver.
func newIndexedSlice(driverName string, s *resourceapi.ResourceSlice) *indexedSlice {
	node := s.Spec.Pool.Name
	if s.Spec.NodeName != nil {
		node = *s.Spec.NodeName
	}
	out := &indexedSlice{pool: s.Spec.Pool.Name, generation: s.Spec.Pool.Generation, devices: make([]publishedDevice, 0, len(s.Spec.Devices))}
	for i := range s.Spec.Devices {
		d := &s.Spec.Devices[i]
		pd := publishedDevice{
			key:  deviceKey{pool: s.Spec.Pool.Name, device: d.Name},
			port: devicePort(driverName, s.Spec.Pool.Name, d),
			node: node,
			cel:  celDevice(driverName, d),
			raw:  d,
		}
		mode, _ := devicemodel.LookupAttribute(driverName, d, attrQualified(attrMode))
		switch {
		case mode.StringValue == nil:
		case *mode.StringValue == string(devicemodel.ModeShared):
			pd.shared = true
			pd.shares = deviceShares(d)
		case *mode.StringValue == string(devicemodel.ModeLegacy):
			pd.legacy = true
			pd.shares = deviceShares(d)
			if n, _ := devicemodel.LookupAttribute(driverName, d, attrQualified(attrPorts)); n.IntValue != nil {
				pd.ports = max(*n.IntValue, 0)
			}
		}
		out.devices = append(out.devices, pd)
	}
	return out
}

// deviceShares is the rdma.dra.io/shares capacity of a device of several allocations;
// 1 without one, as a legacy single-share device has.
func deviceShares(d *resourceapi.Device) int64 {
	if c, ok := d.Capacity[devicemodel.SharesCapacity]; ok {
		return c.Value.Value()
	}
	return 1
}

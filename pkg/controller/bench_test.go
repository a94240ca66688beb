package controller

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientfeatures "k8s.io/client-go/features"
	clientfeaturestesting "k8s.io/client-go/features/testing"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	rdmafake "github.com/rdma-dra/rdma-dra-driver/pkg/client/clientset/versioned/fake"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
	"github.com/rdma-dra/rdma-dra-driver/pkg/discovery"
	"github.com/rdma-dra/rdma-dra-driver/pkg/mocknode"
)

// The size of BenchmarkClaimEvent's cluster. The default, 1,000 nodes of 8 ports with
// 10,000 allocated claims, runs in well under a minute (make bench-micro).
var (
	benchNodes  = flag.Int("controller-bench-nodes", 1000, "nodes (8 InfiniBand ports each) of BenchmarkClaimEvent")
	benchClaims = flag.Int("controller-bench-claims", 10000, "allocated one-share claims of BenchmarkClaimEvent")
)

// benchPortsPerNode is the node of the bench harness (test/bench): the first 8 cards of the
// large profile, all InfiniBand.
const benchPortsPerNode = 8

// BenchmarkClaimEvent runs the controller on fake clients holding benchNodes nodes' slices,
// as the device model publishes them, benchClaims allocated claims (one share each) and
// the chart's two default pools plus a RoCE pool that selects none of the ports. One
// operation is one claim losing its allocation, timed until the rdma-shared pool's status
// shows it: the time includes the controller's batching delay (usageDelay). Metrics
// besides ns/op and -benchmem's: cpu-ms/event, the process's CPU time per event (the fake
// API server and the informers included); heap-MiB, the heap in use once the caches are
// synced and every pool's status is written, and ctrl-heap-MiB, what of it came with the
// controller (its informers' caches and its own state) on top of the fake clients.
func BenchmarkClaimEvent(b *testing.B) {
	// The generated fake clientset sends no bookmark after a watch's initial events,
	// which a watch-list informer of pools would wait for.
	clientfeaturestesting.SetFeatureDuringTest(b, clientfeatures.WatchListClient, false)
	objs := benchObjects(b, *benchNodes, *benchClaims)

	kube := fake.NewClientset(objs.kube()...)
	rdma := rdmafake.NewSimpleClientset(benchPools()...)
	shares := make(chan int64, 1024)
	rdma.PrependReactor("update", v1alpha1.RdmaPoolResource, func(a k8stesting.Action) (bool, kruntime.Object, error) {
		p, ok := a.(k8stesting.UpdateAction).GetObject().(*v1alpha1.RdmaPool)
		if ok && a.GetSubresource() == "status" && p.Name == "rdma-shared" {
			shares <- p.Status.AllocatedShares
		}
		return false, nil, nil
	})

	base := heapInUse()
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	c := New(devicemodel.DefaultDriverName, kube, rdma, NewMetrics())
	done := make(chan error, 1)
	goroutines := runtime.NumGoroutine()
	go func() { done <- c.Run(ctx, 2) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		// The informers' and fake watches' goroutines end after Run: wait for them, so
		// that the next run's heap figures do not include this run's clients.
		for deadline := time.Now().Add(10 * time.Second); runtime.NumGoroutine() > goroutines && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
	}()

	want := int64(len(objs.claims))
	awaitShares(b, shares, want)
	settle(b)
	heap := heapInUse()

	if b.N > len(objs.claims) {
		b.Fatalf("%d events, only %d claims", b.N, len(objs.claims))
	}
	cpu := cpuTime()
	b.ResetTimer()
	for i := range b.N {
		claim := objs.claims[i].DeepCopy()
		claim.Status.Allocation = nil
		if _, err := kube.ResourceV1().ResourceClaims(claim.Namespace).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
		want--
		awaitShares(b, shares, want)
	}
	b.StopTimer()
	// After the loop: ResetTimer drops the metrics reported before it.
	b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
	b.ReportMetric(float64(heap-base)/(1<<20), "ctrl-heap-MiB")
	b.ReportMetric(float64(cpuTime()-cpu)/float64(time.Millisecond)/float64(b.N), "cpu-ms/event")
}

// awaitShares waits until the rdma-shared pool's status is written with want allocated
// shares.
func awaitShares(b *testing.B, shares <-chan int64, want int64) {
	b.Helper()
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case got := <-shares:
			if got == want {
				return
			}
		case <-timeout:
			b.Fatalf("rdma-shared never reported %d allocated shares", want)
		}
	}
}

// settle waits until the process has been idle for a while: the controller's delayed
// recounts after the initial sync must not run inside the timed loop.
func settle(b *testing.B) {
	b.Helper()
	const idle = 10 * time.Millisecond // CPU time per quarter second that counts as idle
	deadline := time.Now().Add(2 * time.Minute)
	time.Sleep(2 * usageDelay)
	for prev := cpuTime(); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		now := cpuTime()
		if now-prev < idle {
			return
		}
		prev = now
	}
	b.Fatal("the controller did not settle after the initial sync")
}

// heapInUse is the live heap after a garbage collection: HeapAlloc, which unlike
// HeapInuse does not count the free room of partly used spans.
func heapInUse() int64 {
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	return int64(mem.HeapAlloc)
}

// cpuTime is the user and system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCluster is the API objects of the benchmark, built once per size.
type benchCluster struct {
	slices []*resourceapi.ResourceSlice
	claims []*resourceapi.ResourceClaim
}

func (c *benchCluster) kube() []kruntime.Object {
	out := make([]kruntime.Object, 0, len(c.slices)+len(c.claims))
	for _, s := range c.slices {
		out = append(out, s)
	}
	for _, claim := range c.claims {
		out = append(out, claim)
	}
	return out
}

var (
	benchMu       sync.Mutex
	benchClusters = map[[2]int]*benchCluster{}
)

// benchObjects builds the slices of nodes 8-port nodes with the plugin's device model and
// claims one-share claims spread over their ports, node by node.
func benchObjects(b *testing.B, nodes, claims int) *benchCluster {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if c, ok := benchClusters[[2]int{nodes, claims}]; ok {
		return c
	}
	inv := benchInventory(b)
	c := &benchCluster{}
	shared := make([][]deviceKey, nodes)
	for n := range nodes {
		res, err := devicemodel.Build(inv, devicemodel.Options{NodeName: fmt.Sprintf("node-%04d", n)})
		if err != nil {
			b.Fatal(err)
		}
		for _, s := range res.ResourceSlices() {
			c.slices = append(c.slices, s)
			for _, d := range s.Spec.Devices {
				if ptr.Deref(d.AllowMultipleAllocations, false) {
					shared[n] = append(shared[n], deviceKey{pool: s.Spec.Pool.Name, device: d.Name})
				}
			}
		}
		if len(shared[n]) != benchPortsPerNode {
			b.Fatalf("node %d has %d shared devices, want %d", n, len(shared[n]), benchPortsPerNode)
		}
	}
	one := *apiresource.NewQuantity(1, apiresource.DecimalSI)
	for i := range claims {
		d := shared[i%nodes][(i/nodes)%benchPortsPerNode]
		name := fmt.Sprintf("claim-%05d", i)
		c.claims = append(c.claims, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "r", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-shared"}}}}},
			Status: resourceapi.ResourceClaimStatus{Allocation: &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "r", Driver: devicemodel.DefaultDriverName, Pool: d.pool, Device: d.device,
					ShareID:          ptr.To(types.UID("share-" + name)),
					ConsumedCapacity: map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: one},
				}}}}},
		})
	}
	benchClusters[[2]int{nodes, claims}] = c
	return c
}

// benchInventory discovers the bench harness's node: the first 8 cards of the large
// profile, written as a mock tree.
func benchInventory(b *testing.B) *discovery.Inventory {
	b.Helper()
	prof, err := mocknode.Lookup("large")
	if err != nil {
		b.Fatal(err)
	}
	full := prof.Node()
	node := &mocknode.Node{NetnsMode: full.NetnsMode, RDMADevices: full.RDMADevices[:benchPortsPerNode]}
	keep := map[string]bool{}
	for _, d := range node.RDMADevices {
		keep[d.PCI] = true
	}
	for _, f := range full.PCIFunctions {
		if keep[f.Address] {
			node.PCIFunctions = append(node.PCIFunctions, f)
		}
	}
	for _, nd := range full.Netdevs {
		if keep[nd.PCI] {
			node.Netdevs = append(node.Netdevs, nd)
		}
	}
	dir := b.TempDir()
	if err := node.Write(dir, mocknode.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	inv, err := discovery.New(discovery.Options{SysfsRoot: filepath.Join(dir, mocknode.SysDir)}).Discover(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return inv
}

// benchPools are the chart's default pools and a RoCE pool that none of the ports is in.
func benchPools() []kruntime.Object {
	roce := newPool("roce-shared", v1alpha1.PoolModeShared, t0)
	roce.Spec.Selectors.LinkTypes = []v1alpha1.LinkType{"ETH"}
	return []kruntime.Object{
		newPool("rdma-shared", v1alpha1.PoolModeShared, t0),
		newPool("rdma-exclusive", v1alpha1.PoolModeExclusive, t0),
		roce,
	}
}

package bench

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	drapb "k8s.io/kubelet/pkg/apis/dra/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// benchNamespace holds the harness's claims.
const benchNamespace = "rdma-bench"

// sharedDevices returns the names of the shared devices in the plugin's pool, in slice
// order. The pool must be complete (startPlugin waited for that); a complete pool without
// shared devices is a fault of the plugin, not something to wait out.
func sharedDevices(ctx context.Context, kube kubernetes.Interface, p *Plugin) ([]string, error) {
	slices, err := nodeSlices(ctx, kube, p.Opts.NodeName)
	if err != nil {
		return nil, err
	}
	devices, err := completePool(slices, devicemodel.DefaultDriverName, p.Pool())
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", p.Opts.NodeName, err)
	}
	var out []string
	for i := range devices {
		if m, _ := devicemodel.LookupAttribute(devicemodel.DefaultDriverName, &devices[i], devicemodel.AttributeDomain+"/mode"); m.StringValue != nil && *m.StringValue == string(devicemodel.ModeShared) {
			out = append(out, devices[i].Name)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("node %s publishes no shared devices in its complete pool %s (%d devices)", p.Opts.NodeName, p.Pool(), len(devices))
	}
	return out, nil
}

// createAllocatedClaims creates n claims of k shares each (one share of k different
// ports, starting at a rotating port) and writes their allocation for the plugin's pool
// through the status subresource, as the scheduler would.
func createAllocatedClaims(ctx context.Context, kube kubernetes.Interface, p *Plugin, prefix string, n, k int) ([]*drapb.Claim, error) {
	devices, err := sharedDevices(ctx, kube, p)
	if err != nil {
		return nil, err
	}
	if k > len(devices) {
		return nil, fmt.Errorf("claims of %d devices on a node with %d shared devices", k, len(devices))
	}
	one := *apiresource.NewQuantity(1, apiresource.DecimalSI)
	var out []*drapb.Claim
	for i := range n {
		claim := &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: fmt.Sprintf("%s-%d", prefix, i)},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: "rdma",
				Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: sharedClass, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: int64(k),
					Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: one}}},
			}}}},
		}
		created, err := kube.ResourceV1().ResourceClaims(benchNamespace).Create(ctx, claim, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create claim %s: %w", claim.Name, err)
		}
		var results []resourceapi.DeviceRequestAllocationResult
		for j := range k {
			share := uuid.NewUUID()
			results = append(results, resourceapi.DeviceRequestAllocationResult{
				Request: "rdma", Driver: devicemodel.DefaultDriverName, Pool: p.Pool(),
				Device: devices[(i+j)%len(devices)], ShareID: &share,
				ConsumedCapacity: map[resourceapi.QualifiedName]apiresource.Quantity{devicemodel.SharesCapacity: one},
			})
		}
		created.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: results},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{
				Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{p.Opts.NodeName},
			}}}}},
		}
		if _, err := kube.ResourceV1().ResourceClaims(benchNamespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			return nil, fmt.Errorf("allocate claim %s: %w", claim.Name, err)
		}
		out = append(out, &drapb.Claim{Namespace: benchNamespace, Name: created.Name, Uid: string(created.UID)})
	}
	return out, nil
}

// dialPlugin connects to the plugin's DRA socket the way the kubelet does.
func dialPlugin(p *Plugin) (drapb.DRAPluginClient, func() error, error) {
	conn, err := grpc.NewClient("unix://"+p.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, fmt.Errorf("dial %s: %w", p.Socket, err)
	}
	return drapb.NewDRAPluginClient(conn), conn.Close, nil
}

// LoadResult is one prepare/unprepare load run.
type LoadResult struct {
	Concurrency int     `json:"concurrency"`
	Devices     int     `json:"devices_per_claim"`
	Cycles      int     `json:"cycles"`
	Seconds     float64 `json:"seconds"`
	// PerSec is prepare+unprepare cycles completed per second.
	PerSec    float64 `json:"cycles_per_sec"`
	Prepare   Summary `json:"prepare"`
	Unprepare Summary `json:"unprepare"`
}

// runLoad runs one worker per claim: each prepares its claim over gRPC, unprepares it,
// and repeats until it did rounds cycles (rounds > 0) or until d passed (d > 0),
// whichever comes first.
func runLoad(ctx context.Context, client drapb.DRAPluginClient, claims []*drapb.Claim, devices, rounds int, d time.Duration) (LoadResult, error) {
	var (
		mu          sync.Mutex
		prep, unpre []time.Duration
		firstErr    error
		wg          sync.WaitGroup
	)
	start := time.Now()
	deadline := start.Add(d)
	for _, c := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var p, u []time.Duration
			for i := 0; (rounds == 0 || i < rounds) && (d == 0 || time.Now().Before(deadline)); i++ {
				dp, du, err := cycle(ctx, client, c)
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
				p, u = append(p, dp), append(u, du)
			}
			mu.Lock()
			prep, unpre = append(prep, p...), append(unpre, u...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr != nil {
		return LoadResult{}, firstErr
	}
	return LoadResult{
		Concurrency: len(claims), Devices: devices, Cycles: len(prep), Seconds: elapsed.Seconds(),
		PerSec: float64(len(prep)) / elapsed.Seconds(), Prepare: Summarize(prep), Unprepare: Summarize(unpre),
	}, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// cycle prepares and unprepares one claim and returns both latencies.
func cycle(ctx context.Context, client drapb.DRAPluginClient, c *drapb.Claim) (time.Duration, time.Duration, error) {
	t0 := time.Now()
	pr, err := client.NodePrepareResources(ctx, &drapb.NodePrepareResourcesRequest{Claims: []*drapb.Claim{c}})
	if err != nil {
		return 0, 0, fmt.Errorf("prepare %s: %w", c.Name, err)
	}
	dp := time.Since(t0)
	if r := pr.Claims[c.Uid]; r == nil || r.Error != "" || len(r.Devices) == 0 {
		return 0, 0, fmt.Errorf("prepare %s: %v", c.Name, r)
	}
	t1 := time.Now()
	ur, err := client.NodeUnprepareResources(ctx, &drapb.NodeUnprepareResourcesRequest{Claims: []*drapb.Claim{c}})
	if err != nil {
		return 0, 0, fmt.Errorf("unprepare %s: %w", c.Name, err)
	}
	du := time.Since(t1)
	if r := ur.Claims[c.Uid]; r == nil || r.Error != "" {
		return 0, 0, fmt.Errorf("unprepare %s: %v", c.Name, r)
	}
	return dp, du, nil
}

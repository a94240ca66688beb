package claimstatus

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// The driver and pool of the test claims' entries.
const (
	testDriver = "rdma.dra.io"
	testPool   = "node-1-rdma"
)

// statusTestWriter returns a running writer on kube with fast retries and its metrics.
// statusRetryMax is the longest backoff of statusTestWriter's writer.
const statusRetryMax = 20 * time.Millisecond

func statusTestWriter(t *testing.T, kube *fake.Clientset) (*Writer, *metrics.Plugin, context.Context) {
	t.Helper()
	// Verbosity 2: the writes themselves (V(4)) would flood the test log.
	ctx := klog.NewContext(context.Background(), ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2))))
	m := metrics.NewPlugin()
	w := New(Options{DriverName: testDriver, Kube: kube, Metrics: m, Workers: 4, RetryBase: time.Millisecond, RetryMax: statusRetryMax})
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		w.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return w, m, ctx
}

// statusMetric is the value of a counter, gauge or the sample count of a histogram.
func statusMetric(t *testing.T, m *metrics.Plugin, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if want, ok := labels[l.GetName()]; ok && want != l.GetValue() {
					continue metric
				}
			}
			switch {
			case s.GetCounter() != nil:
				return s.GetCounter().GetValue()
			case s.GetGauge() != nil:
				return s.GetGauge().GetValue()
			case s.GetHistogram() != nil:
				return float64(s.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no metric %s %v", name, labels)
	return 0
}

func statusClaim(i int) *resourceapi.ResourceClaim {
	name := fmt.Sprintf("c%d", i)
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)}}
}

// wantStatus is what the test set last for a claim.
type wantStatus struct {
	generation int64
	devices    []DeviceStatus
}

// TestWriterFloodWritesEveryFinalStatus floods the writer with thousands of claims,
// several updates each, some forgotten and set again (unprepare, prepare), through an
// API server that is slow and fails a fifth of the writes with errors worth retrying,
// and checks that the API server ends up with the latest status of every claim.
func TestWriterFloodWritesEveryFinalStatus(t *testing.T) {
	const claims, updates = 3000, 3
	var objects []runtime.Object
	for i := range claims {
		objects = append(objects, statusClaim(i))
	}
	kube := fake.NewClientset(objects...)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	transient := []error{
		apierrors.NewInternalError(fmt.Errorf("etcd is slow")),
		apierrors.NewTooManyRequests("slow down", 1),
		apierrors.NewServerTimeout(schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}, "patch", 1),
		apierrors.NewServiceUnavailable("restarting"),
	}
	calls := 0
	kube.PrependReactor("patch", "resourceclaims", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		calls++
		fail, delay := rng.IntN(5) == 0, time.Duration(rng.IntN(100))*time.Microsecond
		err := transient[rng.IntN(len(transient))]
		mu.Unlock()
		time.Sleep(delay)
		if fail {
			return true, nil, err
		}
		return false, nil, nil // the tracker applies it
	})
	w, m, ctx := statusTestWriter(t, kube)

	want := make([]wantStatus, claims)
	var wg sync.WaitGroup
	for worker := range 8 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(worker), 7))
			for i := worker; i < claims; i += 8 {
				claim := statusClaim(i)
				for gen := int64(1); gen <= updates; gen++ {
					if r.IntN(4) == 0 {
						// Unprepared and prepared again.
						w.Forget(claim.UID)
					}
					devices := []DeviceStatus{{Pool: testPool, Device: fmt.Sprintf("mlx5-%d-p1-shared", r.IntN(8)), ShareID: fmt.Sprintf("share-%d", gen),
						Data: &v1alpha1.DeviceStatusData{IBDev: "mlx5_0", Port: int(gen)}}}
					if r.IntN(3) == 0 {
						devices[0].Network = &NetworkDeviceData{InterfaceName: "net1", IPs: []string{fmt.Sprintf("10.0.%d.%d/16", i/250, i%250)}, HardwareAddress: "02:00:00:00:00:01"}
					}
					w.Set(ClaimRef{Namespace: "ns", Name: claim.Name, UID: claim.UID, Generation: gen}, devices)
					want[i] = wantStatus{generation: gen, devices: devices}
					if r.IntN(50) == 0 {
						time.Sleep(time.Millisecond)
					}
				}
			}
		})
	}
	wg.Wait()
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := w.WaitIdle(waitCtx); err != nil {
		t.Fatal(err)
	}

	for i := range claims {
		name := statusClaim(i).Name
		got, err := kube.ResourceV1().ResourceClaims("ns").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sameStatus(got.Status.Devices, want[i]); err != nil {
			t.Errorf("claim %s: %v", name, err)
		}
	}
	if t.Failed() {
		return
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusFailed}); n != 0 {
		t.Errorf("%g updates failed for good, want none", n)
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusRetried}); n == 0 {
		t.Error("no retries counted although a fifth of the writes failed")
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_pending", nil); n != 0 {
		t.Errorf("pending gauge is %g after the writer went idle", n)
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_lag_seconds", nil); n < claims {
		t.Errorf("lag observed %g times, want at least once per claim (%d)", n, claims)
	}
	written := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusWritten})
	t.Logf("%d claims × %d updates: %d API calls, %g written, %g coalesced, %g forgotten, %g retried", claims, updates, calls, written,
		statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusCoalesced}),
		statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusForgotten}),
		statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusRetried}))
}

// sameStatus compares a claim's status.devices with what was set last.
func sameStatus(got []resourceapi.AllocatedDeviceStatus, want wantStatus) error {
	if len(got) != len(want.devices) {
		return fmt.Errorf("%d status devices, want %d", len(got), len(want.devices))
	}
	for i, g := range got {
		w := want.devices[i]
		if g.Driver != testDriver || g.Pool != w.Pool || g.Device != w.Device || g.ShareID == nil || *g.ShareID != w.ShareID {
			return fmt.Errorf("device %d is %s/%s/%s share %v, want %s/%s share %s", i, g.Driver, g.Pool, g.Device, g.ShareID, w.Pool, w.Device, w.ShareID)
		}
		if len(g.Conditions) != 1 || g.Conditions[0].ObservedGeneration != want.generation {
			return fmt.Errorf("device %d conditions %+v, want Ready at generation %d", i, g.Conditions, want.generation)
		}
		var data v1alpha1.DeviceStatusData
		if g.Data == nil || json.Unmarshal(g.Data.Raw, &data) != nil || data.Port != w.Data.Port {
			return fmt.Errorf("device %d data %v, want port %d", i, g.Data, w.Data.Port)
		}
		switch n := g.NetworkData; {
		case w.Network == nil && n != nil:
			return fmt.Errorf("device %d has network data %+v, want none", i, n)
		case w.Network != nil && (n == nil || n.InterfaceName != w.Network.InterfaceName || len(n.IPs) != 1 || n.IPs[0] != w.Network.IPs[0] || n.HardwareAddress != w.Network.HardwareAddress):
			return fmt.Errorf("device %d network data %+v, want %+v", i, n, w.Network)
		}
	}
	return nil
}

// TestWriterErrors checks which errors end a claim's write and which are retried,
// in a synctest bubble whose clock the backoffs run on.
func TestWriterErrors(t *testing.T) {
	gr := schema.GroupResource{Group: "resource.k8s.io", Resource: "resourceclaims"}
	for _, tc := range []struct {
		name string
		err  error
		// failures is how many calls fail before the API server accepts the write.
		failures  int
		wantCalls int
		wantFinal bool
	}{
		{name: "forbidden", err: apierrors.NewForbidden(gr, "c0", nil), failures: 100, wantCalls: 1, wantFinal: true},
		{name: "claim deleted", err: apierrors.NewNotFound(gr, "c0"), failures: 100, wantCalls: 1, wantFinal: true},
		{name: "claim replaced (UID precondition)", err: apierrors.NewConflict(gr, "c0", fmt.Errorf("uid mismatch")), failures: 100, wantCalls: 1, wantFinal: true},
		{name: "API server unavailable", err: apierrors.NewServiceUnavailable("down"), failures: 3, wantCalls: 4},
		{name: "rate limited", err: apierrors.NewTooManyRequests("slow down", 0), failures: 2, wantCalls: 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				claim := statusClaim(0)
				kube := fake.NewClientset(claim)
				var mu sync.Mutex
				calls := 0
				kube.PrependReactor("patch", "resourceclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
					mu.Lock()
					defer mu.Unlock()
					calls++
					if calls <= tc.failures {
						return true, nil, tc.err
					}
					return false, nil, nil
				})
				w, m, ctx := statusTestWriter(t, kube)
				w.Set(RefOf(claim), []DeviceStatus{{Pool: testPool, Device: "mlx5-0-p1", Data: &v1alpha1.DeviceStatusData{IBDev: "mlx5_0", Port: 1}}})
				waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				if err := w.WaitIdle(waitCtx); err != nil {
					t.Fatal(err)
				}
				// A wrongly scheduled retry would be due within the longest backoff: move
				// the bubble's clock past it and let everything run until it waits again.
				time.Sleep(statusRetryMax)
				synctest.Wait()
				mu.Lock()
				got := calls
				mu.Unlock()
				if got != tc.wantCalls {
					t.Errorf("%d API calls, want %d", got, tc.wantCalls)
				}
				failed := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusFailed})
				if (failed == 1) != tc.wantFinal {
					t.Errorf("failed for good: %g, want %v", failed, tc.wantFinal)
				}
				stored, err := kube.ResourceV1().ResourceClaims("ns").Get(ctx, claim.Name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if written := len(stored.Status.Devices) == 1; written == tc.wantFinal {
					t.Errorf("status written: %v, want %v", written, !tc.wantFinal)
				}
			})
		})
	}
}

// TestWriterForgetAndNetworkData checks that Forget empties the pending set, and
// that Update changes the status in place: the network data a later path (the
// attachment) adds to what prepare set is kept.
func TestWriterForgetAndNetworkData(t *testing.T) {
	claim := statusClaim(0)
	m := metrics.NewPlugin()
	w := New(Options{DriverName: testDriver, Kube: fake.NewClientset(claim), Metrics: m})
	devices := []DeviceStatus{{Pool: testPool, Device: "mlx5-0-p1", Data: &v1alpha1.DeviceStatusData{IBDev: "mlx5_0", Port: 1}}}
	w.Set(RefOf(claim), devices)
	w.Set(RefOf(claim), devices)
	if n := w.Pending(); n != 1 {
		t.Errorf("pending %d after two sets of one claim, want 1", n)
	}
	w.Update(RefOf(claim), func(ds []DeviceStatus) []DeviceStatus {
		ds[0].Network = &NetworkDeviceData{InterfaceName: "net1", IPs: []string{"192.0.2.5/24"}}
		return ds
	})
	w.mu.Lock()
	got := cloneDeviceStatus(w.claims[claim.UID].devices)
	w.mu.Unlock()
	if got[0].Network == nil || got[0].Network.InterfaceName != "net1" {
		t.Errorf("update lost the network data: %+v", got[0])
	}
	w.Forget(claim.UID)
	w.Forget("never-prepared")
	if n := w.Pending(); n != 0 {
		t.Errorf("pending %d after forget, want 0", n)
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusForgotten}); n != 1 {
		t.Errorf("forgotten %g, want 1", n)
	}
	if n := statusMetric(t, m, "rdma_dra_claim_status_updates_total", map[string]string{"result": metrics.StatusCoalesced}); n != 2 {
		t.Errorf("coalesced %g, want 2", n)
	}
	if err := w.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
}

package publish_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/rdma-dra/rdma-dra-driver/internal/testutil/livenode"
	"github.com/rdma-dra/rdma-dra-driver/pkg/metrics"
)

// controllerSink publishes through the ResourceSlice controller, as the kubelet plugin
// helper does: started by the first publish, updated by the later ones.
type controllerSink struct {
	kube kubernetes.Interface
	ctx  context.Context

	mu   sync.Mutex
	ctrl *resourceslice.Controller
}

func (s *controllerSink) PublishResources(_ context.Context, r resourceslice.DriverResources) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctrl != nil {
		s.ctrl.Update(&r)
		return nil
	}
	ctrl, err := resourceslice.StartController(s.ctx, resourceslice.Options{
		DriverName: livenode.DriverName,
		KubeClient: s.kube,
		Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: livenode.NodeName, UID: "node-uid"},
		Resources:  &r,
	})
	if err != nil {
		return err
	}
	s.ctrl = ctrl
	return nil
}

func (s *controllerSink) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctrl != nil {
		s.ctrl.Stop()
	}
}

// apiServerLike makes the fake client's ResourceSlices behave like the API server's where
// the ResourceSlice controller depends on it: names from generateName, a resource version
// that grows with every write, and the time stamp of new taints.
func apiServerLike(kube *fake.Clientset) *fake.Clientset {
	var version atomic.Int64
	stamp := func(slice *resourceapi.ResourceSlice) {
		slice.ResourceVersion = strconv.FormatInt(version.Add(1), 10)
		now := metav1.NewTime(time.Now().Truncate(time.Second))
		for i := range slice.Spec.Devices {
			for j := range slice.Spec.Devices[i].Taints {
				if slice.Spec.Devices[i].Taints[j].TimeAdded == nil {
					slice.Spec.Devices[i].Taints[j].TimeAdded = &now
				}
			}
		}
	}
	kube.PrependReactor("create", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		slice := action.(k8stesting.CreateAction).GetObject().(*resourceapi.ResourceSlice)
		if slice.Name == "" {
			slice.Name = slice.GenerateName + strconv.FormatInt(version.Load(), 10)
		}
		stamp(slice)
		return false, nil, nil // the object tracker stores it
	})
	kube.PrependReactor("update", "resourceslices", func(action k8stesting.Action) (bool, runtime.Object, error) {
		stamp(action.(k8stesting.UpdateAction).GetObject().(*resourceapi.ResourceSlice))
		return false, nil, nil
	})
	return kube
}

// TestChangeToSliceLatency measures, on the real clock, the time from writing a port's
// state file to the ResourceSlice in the (fake) API server carrying the change, over 20
// flips. The poll interval is short here so that the test is quick; the rest (scan,
// model, controller queue, API call) is what a one-second poll adds its up-to-a-second to.
// It logs the figures and asserts no bound on them: a unit test on a shared machine
// cannot, and make bench holds the plugin to its goal (event_to_slice_ms).
func TestChangeToSliceLatency(t *testing.T) {
	const (
		flips = 20
		poll  = 50 * time.Millisecond
	)
	kube := apiServerLike(fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: livenode.NodeName, UID: "node-uid"}}))
	ctrlCtx, cancel := context.WithCancel(klog.NewContext(context.Background(), klog.Background().V(1)))
	defer cancel()
	sink := &controllerSink{kube: kube, ctx: ctrlCtx}
	defer sink.stop()
	watcher, err := kube.ResourceV1().ResourceSlices().Watch(ctrlCtx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()

	n := livenode.New(t, "disabled-port", livenode.Options{Clock: clock.RealClock{}, Poll: poll, Next: sink})

	// tainted reports, from each slice event, whether mlx5-0-p1 is tainted.
	tainted := make(chan bool, 100)
	go func() {
		for ev := range watcher.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			slice := ev.Object.(*resourceapi.ResourceSlice)
			for _, d := range slice.Spec.Devices {
				if d.Name == "mlx5-0-p1" {
					tainted <- len(d.Taints) > 0
				}
			}
		}
	}()
	waitTainted := func(want bool) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case got := <-tainted:
				if got == want {
					return
				}
			case <-deadline:
				t.Fatalf("slice not updated to tainted=%v within 10s", want)
			}
		}
	}
	waitTainted(false) // the first publish

	var total, afterPublish []time.Duration
	for i := range flips {
		down := i%2 == 0
		start := time.Now()
		if down {
			n.SetState("mlx5_0", 1, "1: DOWN", "3: Disabled")
		} else {
			n.SetState("mlx5_0", 1, "4: ACTIVE", "5: LinkUp")
		}
		published := n.Sink.Count()
		waitTainted(down)
		end := time.Now()
		total = append(total, end.Sub(start))
		if at, ok := n.Sink.At(published); ok {
			afterPublish = append(afterPublish, end.Sub(at))
		}
	}
	median := func(d []time.Duration) time.Duration {
		s := slices.Clone(d)
		slices.Sort(s)
		return s[len(s)/2]
	}
	t.Logf("state file written -> slice updated, poll %s, %d flips: median %s, max %s", poll, flips, median(total), slices.Max(total))
	t.Logf("PublishResources -> slice updated: median %s, max %s", median(afterPublish), slices.Max(afterPublish))
	count, sum := histogram(t, n.Metrics, "rdma_dra_republish_latency_seconds")
	t.Logf("change noticed -> PublishResources returned (republish_latency_seconds): %d republishes, mean %s",
		count, time.Duration(sum/float64(count)*float64(time.Second)))
	// A poll may fall between the writes of state and phys_state and publish twice.
	if count < flips {
		t.Errorf("%d republishes timed, want at least %d", count, flips)
	}
	if got := metricValue(t, n.Metrics, "rdma_dra_republish_damped_total"); got != 0 {
		t.Errorf("undamped node damped %v times", got)
	}
}

// histogram returns the sample count and sum of an unlabelled histogram.
func histogram(t *testing.T, m *metrics.Plugin, name string) (uint64, float64) {
	t.Helper()
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatalf("histogram %s not found", name)
	return 0, 0
}

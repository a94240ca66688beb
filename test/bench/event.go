package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// EventResult is the time from port state changes to the updated slices.
type EventResult struct {
	// RescanInterval is the plugin's --rescan-interval; zero is its default.
	RescanInterval string  `json:"rescan_interval"`
	Flips          int     `json:"flips"`
	Latency        Summary `json:"latency"`
}

// measureEventToSlice flips port mlx5_0/1 of the plugin's node between DOWN and ACTIVE
// flips times. Each flip comes at a random moment within one rescan period of the
// previous one (so that flips do not line up with the plugin's ticker), and is timed from
// the write of the state file to the moment a watch on the node's ResourceSlices shows
// the device's taint added or removed.
func measureEventToSlice(ctx context.Context, kube kubernetes.Interface, p *Plugin, period time.Duration, flips int) (EventResult, error) {
	logger := klog.FromContext(ctx)
	state := filepath.Join(p.SysRoot, "class", "infiniband", "mlx5_0", "ports", "1", "state")
	device := devicemodel.DeviceName("mlx5_0", 1)
	rng := rand.New(rand.NewPCG(7, 7))
	var samples []time.Duration
	for i := range flips {
		down := i%2 == 0
		content, want := "4: ACTIVE\n", false
		if down {
			content, want = "1: DOWN\n", true
		}
		select {
		case <-ctx.Done():
			return EventResult{}, ctx.Err()
		case <-time.After(time.Duration(rng.Int64N(int64(period)))):
		}
		list, err := kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: nodeField(p.Opts.NodeName)})
		if err != nil {
			return EventResult{}, fmt.Errorf("list slices: %w", err)
		}
		if tainted(list.Items, device) == want {
			return EventResult{}, fmt.Errorf("device %s already has taint state %v before flip %d", device, want, i)
		}
		start := time.Now()
		if err := os.WriteFile(state, []byte(content), 0o644); err != nil {
			return EventResult{}, fmt.Errorf("flip port state: %w", err)
		}
		if err := waitTaint(ctx, kube, p.Opts.NodeName, list.ResourceVersion, device, want, 3*period+30*time.Second); err != nil {
			return EventResult{}, fmt.Errorf("flip %d: %w", i, err)
		}
		took := time.Since(start)
		samples = append(samples, took)
		logger.Info("Port state reached the API server", "flip", i, "down", down, "took", took)
	}
	return EventResult{Flips: flips, Latency: Summarize(samples)}, nil
}

func nodeField(node string) string {
	return fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, node).String()
}

// waitTaint watches the node's slices from resourceVersion until device has (want) or
// lacks the port-not-active taint.
func waitTaint(ctx context.Context, kube kubernetes.Interface, node, rv, device string, want bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := kube.ResourceV1().ResourceSlices().Watch(ctx, metav1.ListOptions{FieldSelector: nodeField(node), ResourceVersion: rv})
	if err != nil {
		return fmt.Errorf("watch slices: %w", err)
	}
	defer w.Stop()
	current := map[string]resourceapi.ResourceSlice{}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("taint of %s not %v after %s: %w", device, want, timeout, ctx.Err())
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("watch of slices ended")
			}
			s, isSlice := ev.Object.(*resourceapi.ResourceSlice)
			if !isSlice {
				continue
			}
			if ev.Type == watch.Deleted {
				delete(current, s.Name)
				continue
			}
			current[s.Name] = *s
			var items []resourceapi.ResourceSlice
			for _, v := range current {
				items = append(items, v)
			}
			if has, seen := taintState(items, device); seen && has == want {
				return nil
			}
		}
	}
}

// tainted reports whether device carries the port-not-active taint in slices.
func tainted(items []resourceapi.ResourceSlice, device string) bool {
	has, _ := taintState(items, device)
	return has
}

func taintState(items []resourceapi.ResourceSlice, device string) (has, seen bool) {
	for _, s := range items {
		for _, d := range s.Spec.Devices {
			if d.Name != device {
				continue
			}
			return slices.ContainsFunc(d.Taints, func(t resourceapi.DeviceTaint) bool { return t.Key == devicemodel.NotActiveTaintKey }), true
		}
	}
	return false, false
}

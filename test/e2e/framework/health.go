package framework

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"
)

// PortNotActiveTaint is the key of the device taint of a port that is not ACTIVE.
const PortNotActiveTaint = "rdma.dra.io/port-not-active"

// Port states as the kernel writes them into a port's state file.
const (
	PortDown   = "1: DOWN"
	PortActive = "4: ACTIVE"
)

// portStateFile is the mock node's state file of an RDMA device's port on the host. The
// class/infiniband entries are symbolic links into the devices tree, which the plugin
// reads; Host.WriteFile replaces the file they resolve to.
func (e *Env) portStateFile(ibdev string, port int) string {
	return filepath.Join(e.paths().SysRoot, "class", "infiniband", ibdev, "ports", fmt.Sprint(port), "state")
}

// SetPortState writes state (e.g. PortDown) into the port's state file on the host,
// replacing the file at once (Host.WriteFile), so that a poll never reads it half written.
func (e *Env) SetPortState(ibdev string, port int, state string) error {
	h, err := e.host()
	if err != nil {
		return err
	}
	if err := h.WriteFile(e.portStateFile(ibdev, port), []byte(state+"\n")); err != nil {
		return fmt.Errorf("write port state: %w", err)
	}
	return nil
}

// RestorePortOnCleanup makes the port ACTIVE again when the test ends and waits until
// its devices are published without the taint, so that later tests find it usable.
func (e *Env) RestorePortOnCleanup(t *testing.T, ibdev string, port int, devices ...string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := e.SetPortState(ibdev, port, PortActive); err != nil {
			t.Errorf("restore %s port %d: %v", ibdev, port, err)
			return
		}
		if _, err := e.WaitTaint(ctx, time.Minute, "", devices...); err != nil {
			t.Errorf("restore %s port %d: %v", ibdev, port, err)
		}
	})
}

// DeviceTaint returns the value of the device's taint with key, and whether it has one.
func DeviceTaint(d resourceapi.Device, key string) (resourceapi.DeviceTaint, bool) {
	for _, taint := range d.Taints {
		if taint.Key == key {
			return taint, true
		}
	}
	return resourceapi.DeviceTaint{}, false
}

// WaitTaint polls the node's ResourceSlices (every 20 ms, so that the time it returns is
// close to the moment of publishing) until every one of devices carries the
// PortNotActiveTaint with value state, or, for state "", none of them has it. It returns
// when it saw that.
func (e *Env) WaitTaint(ctx context.Context, timeout time.Duration, state string, devices ...string) (time.Time, error) {
	return e.WaitDeviceTaint(ctx, timeout, PortNotActiveTaint, state, devices...)
}

// WaitDeviceTaint is WaitTaint for the taint with key: every one of devices carries it
// with value, or, for value "", none of them has it.
func (e *Env) WaitDeviceTaint(ctx context.Context, timeout time.Duration, key, value string, devices ...string) (time.Time, error) {
	var seen time.Time
	err := Poll(ctx, timeout, 20*time.Millisecond, func(ctx context.Context) error {
		for _, name := range devices {
			dev, err := e.SliceDevice(ctx, name)
			if err != nil {
				return err
			}
			taint, ok := DeviceTaint(dev, key)
			switch {
			case value == "" && ok:
				return fmt.Errorf("%s still tainted %s=%s", name, taint.Key, taint.Value)
			case value != "" && (!ok || taint.Value != value):
				return fmt.Errorf("%s taints %+v, want %s=%s", name, dev.Taints, key, value)
			}
		}
		seen = time.Now()
		return nil
	})
	return seen, err
}

// ResourceHealth returns the health and message of every resource of the container's
// allocatedResourcesStatus, by resource ID.
func ResourceHealth(pod *corev1.Pod, container string) map[string]corev1.ResourceHealth {
	out := map[string]corev1.ResourceHealth{}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name != container {
			continue
		}
		for _, rs := range cs.AllocatedResourcesStatus {
			for _, r := range rs.Resources {
				out[string(r.ResourceID)] = r
			}
		}
	}
	return out
}

// WaitResourceHealth polls the pod (every 100 ms) until every resource in its container's
// allocatedResourcesStatus whose ID contains idPart has health, and at least one does. It
// returns when it saw that and the resources.
func (e *Env) WaitResourceHealth(ctx context.Context, timeout time.Duration, ns, pod, container, idPart string, health corev1.ResourceHealthStatus) (time.Time, []corev1.ResourceHealth, error) {
	var seen time.Time
	var matched []corev1.ResourceHealth
	err := Poll(ctx, timeout, 100*time.Millisecond, func(ctx context.Context) error {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		all := ResourceHealth(p, container)
		matched = matched[:0]
		for id, r := range all {
			if !strings.Contains(id, idPart) {
				continue
			}
			if r.Health != health {
				return fmt.Errorf("%s is %s (%s), want %s", id, r.Health, ptr.Deref(r.Message, ""), health)
			}
			matched = append(matched, r)
		}
		if len(matched) == 0 {
			return fmt.Errorf("no resource with %q in allocatedResourcesStatus: %+v", idPart, all)
		}
		seen = time.Now()
		return nil
	})
	return seen, matched, err
}

// NodeEvents returns "type reason: message" of the events of the cluster's node with
// reason.
func (e *Env) NodeEvents(ctx context.Context, reason string) ([]string, error) {
	evs, err := e.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: fields.AndSelectors(
		fields.OneTermEqualSelector("involvedObject.kind", "Node"),
		fields.OneTermEqualSelector("involvedObject.name", e.Node),
		fields.OneTermEqualSelector("reason", reason),
	).String()})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range evs.Items {
		out = append(out, ev.Type+" "+ev.Reason+": "+ev.Message)
	}
	return out, nil
}

// WaitHealthWatching waits until the running plugin pod logs that it watches port health.
// The plugin starts polling only once the kubelet has registered it, about a second
// after its pod is Ready; a change before that is published by the first poll, which
// would make a latency measurement right after a rollout include the start.
func (e *Env) WaitHealthWatching(ctx context.Context) error {
	return Poll(ctx, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		pod, err := e.PluginPod(ctx)
		if err != nil {
			return err
		}
		logs, err := e.Client.CoreV1().Pods(Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return err
		}
		if !strings.Contains(string(logs), "Watching RDMA port health") {
			return fmt.Errorf("plugin pod %s does not watch port health yet", pod.Name)
		}
		return nil
	})
}

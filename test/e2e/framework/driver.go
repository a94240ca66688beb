package framework

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// ChartDir is the driver's chart in the repository.
func (e *Env) ChartDir() string {
	return filepath.Join(e.Repo, "deployments", "helm", "rdma-dra-driver")
}

// Install runs helm upgrade --install with the cluster's values, the suite's values and
// set, then waits until the plugin is rolled out and publishes wantShares shares per port.
func (e *Env) Install(ctx context.Context, wantShares int64, set ...string) error {
	if err := e.Upgrade(ctx, set...); err != nil {
		return err
	}
	return e.WaitReady(ctx, wantShares)
}

// setFlag is the helm flag that sets s: --set-string for the image tag, which is a string
// whatever it looks like (a short commit hash can be all digits, which --set would make a
// number the chart's schema refuses), --set for the rest.
func setFlag(s string) string {
	if strings.HasPrefix(s, "image.tag=") {
		return "--set-string"
	}
	return "--set"
}

// Upgrade runs helm upgrade --install with the cluster's values, the suite's values and
// set, and does not wait.
func (e *Env) Upgrade(ctx context.Context, set ...string) error {
	args := append([]string{"upgrade", "--install", Release, e.ChartDir(), "--namespace", Namespace, "--create-namespace"}, e.ValuesArgs()...)
	for _, s := range set {
		args = append(args, setFlag(s), s)
	}
	_, err := e.Helm(ctx, args...)
	return err
}

// WaitReady waits for the rollouts of the plugin's DaemonSet and the controller's
// Deployment, for the kubelet to have registered the running plugin pod, and for the
// node's slices to offer wantShares shares on every shared device (offersShares): the
// capacity of each shared device in the partitionable model, as many single-share devices
// per port in the legacy one. A pod created before the registration would have its prepare
// refused ("driver is not registered") and retried later by the kubelet, so without it the
// next test's first pod races the rollout.
func (e *Env) WaitReady(ctx context.Context, wantShares int64) error {
	if err := e.WaitRollout(ctx); err != nil {
		return err
	}
	return Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		slices, err := e.nodeSlices(ctx)
		if err != nil {
			return err
		}
		return offersShares(slices, wantShares)
	})
}

// WaitRollout waits for the rollouts of the plugin's DaemonSet and the controller's
// Deployment and for the kubelet to have registered the running plugin pod.
func (e *Env) WaitRollout(ctx context.Context) error {
	if _, err := e.Kubectl(ctx, "-n", Namespace, "rollout", "status", "daemonset/"+DaemonSet, "--timeout=3m"); err != nil {
		return err
	}
	_, err := e.Client.AppsV1().Deployments(Namespace).Get(ctx, ControllerDeployment, metav1.GetOptions{})
	switch {
	case err == nil:
		if _, err := e.Kubectl(ctx, "-n", Namespace, "rollout", "status", "deployment/"+ControllerDeployment, "--timeout=3m"); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("controller deployment: %w", err)
	}
	return e.WaitRegistered(ctx)
}

// sharesCapacity is the capacity of a shared device: how many shares of its port it
// offers.
const sharesCapacity resourceapi.QualifiedName = "rdma.dra.io/shares"

// offersShares says why the slices do not offer wantShares shares on each of their shared
// devices, or that they have none; nil when they do. In the partitionable model a shared
// device offers its shares as sharesCapacity; in the legacy model (the API server dropped
// the partitionable fields) each share is a device of its own, LegacyShareName(port, k)
// with mode shared, and every port must have wantShares of them.
func offersShares(slices []resourceapi.ResourceSlice, wantShares int64) error {
	shared := 0
	legacy := map[string]int64{}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			c, ok := d.Capacity[sharesCapacity]
			if !ok {
				if mode, ok := devicemodel.LookupAttribute(DriverName, &d, devicemodel.AttrMode); ok && ptr.Deref(mode.StringValue, "") == "shared" {
					port, _, _ := cutLegacyShare(d.Name)
					legacy[port]++
				}
				continue
			}
			shared++
			if c.Value.Value() != wantShares {
				return fmt.Errorf("%s offers %v shares, want %d", d.Name, c.Value.String(), wantShares)
			}
		}
	}
	if shared > 0 {
		return nil
	}
	if len(legacy) == 0 {
		return fmt.Errorf("no device with %s capacity nor legacy share devices published (%d slices)", sharesCapacity, len(slices))
	}
	ports := make([]string, 0, len(legacy))
	for p := range legacy {
		ports = append(ports, p)
	}
	sort.Strings(ports)
	for _, p := range ports {
		if legacy[p] != wantShares {
			return fmt.Errorf("%s has %d legacy share devices, want %d", p, legacy[p], wantShares)
		}
	}
	return nil
}

// cutLegacyShare splits a legacy share device's name, LegacyShareName(port, k), into the
// port's device name and k.
func cutLegacyShare(name string) (port string, k int, ok bool) {
	i := strings.LastIndex(name, "-s")
	if i < 0 {
		return name, 0, false
	}
	k, err := strconv.Atoi(name[i+2:])
	if err != nil || devicemodel.LegacyShareName(name[:i], k) != name {
		return name, 0, false
	}
	return name[:i], k, true
}

// nodeSlices lists the node's ResourceSlices of the driver.
func (e *Env) nodeSlices(ctx context.Context) ([]resourceapi.ResourceSlice, error) {
	slices, err := e.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
		FieldSelector: "spec.driver=" + DriverName + ",spec.nodeName=" + e.Node,
	})
	if err != nil {
		return nil, err
	}
	return slices.Items, nil
}

// SliceDevice returns the device of that name in the node's ResourceSlices of the driver.
func (e *Env) SliceDevice(ctx context.Context, name string) (resourceapi.Device, error) {
	slices, err := e.nodeSlices(ctx)
	if err != nil {
		return resourceapi.Device{}, err
	}
	for _, s := range slices {
		for _, d := range s.Spec.Devices {
			if d.Name == name {
				return d, nil
			}
		}
	}
	return resourceapi.Device{}, fmt.Errorf("device %s not published (%d slices)", name, len(slices))
}

// PluginPod returns the running plugin pod of the node.
func (e *Env) PluginPod(ctx context.Context) (*corev1.Pod, error) {
	pods, err := e.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=kubelet-plugin"})
	if err != nil {
		return nil, err
	}
	var running []*corev1.Pod
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
			running = append(running, p)
		}
	}
	if len(running) != 1 {
		return nil, fmt.Errorf("%d running plugin pods, want 1", len(running))
	}
	return running[0], nil
}

// registeredSockets matches the kubelet's gauge of the plugin registration sockets its
// plugin manager has registered (state actual_state_of_world), with value 1.
var registeredSockets = regexp.MustCompile(`(?m)^plugin_manager_total_plugins\{([^}]*)\} 1$`)

// registeredIn reports whether the kubelet's metrics count a registration socket of one
// of those basenames as registered.
func registeredIn(metrics string, sockets []string) bool {
	for _, m := range registeredSockets.FindAllStringSubmatch(metrics, -1) {
		if !strings.Contains(m[1], `state="actual_state_of_world"`) {
			continue
		}
		for _, s := range sockets {
			if strings.Contains(m[1], "/"+s+`"`) {
				return true
			}
		}
	}
	return false
}

// registrationSockets are the basenames the kubelet plugin helper may give the
// registration socket of a plugin pod in rolling-update mode, as its documentation of
// RollingUpdateRegistrarSocketFile lists them; it picks the first that fits the socket
// path limit. The module does not import the helper itself (it would need its CDI
// dependencies), and trying all three needs no path.
func registrationSockets(driver, podUID string) []string {
	uidHash := sha256.Sum256([]byte(podUID))
	driverUIDHash := sha256.Sum256([]byte(driver + "\x00" + podUID))
	return []string{
		driver + "-" + podUID + "-reg.sock",
		driver + "-" + base64.RawURLEncoding.EncodeToString(uidHash[:8]) + "-reg.sock",
		"dra-" + base64.RawURLEncoding.EncodeToString(driverUIDHash[:16]) + "-reg.sock",
	}
}

// WaitRegistered waits until the node's kubelet has registered the running plugin pod:
// its plugin manager counts the pod's own registration socket (the rolling-update name,
// which carries the pod UID) as registered. The count lives in the kubelet's memory, so
// after a kubelet restart it shows only what the new kubelet registered. (The kubelet
// counts a plugin a moment before it hands it to its DRA manager; a pod created in that
// moment would have its prepare retried, nothing worse.)
func (e *Env) WaitRegistered(ctx context.Context) error {
	return Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		pod, err := e.PluginPod(ctx)
		if err != nil {
			return err
		}
		sockets := registrationSockets(DriverName, string(pod.UID))
		metrics, err := e.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", e.Node, "proxy", "metrics").DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("kubelet metrics: %w", err)
		}
		if registeredIn(string(metrics), sockets) {
			return nil
		}
		return fmt.Errorf("the kubelet has not registered plugin pod %s (sockets %v) yet", pod.Name, sockets)
	})
}

// CheckpointEntry is the part of a checkpoint entry the suite looks at.
type CheckpointEntry struct {
	Phase string `json:"phase"`
}

// Checkpoint reads the plugin's checkpoint on the host; a missing file is empty.
func (e *Env) Checkpoint() (map[string]CheckpointEntry, error) {
	data, err := e.checkpointFile()
	if err != nil {
		return nil, err
	}
	if data == nil {
		return map[string]CheckpointEntry{}, nil
	}
	var cp struct {
		Claims map[string]CheckpointEntry `json:"claims"`
	}
	if err := json.Unmarshal(data, &cp); err != nil {
		return nil, fmt.Errorf("parse checkpoint: %w", err)
	}
	if cp.Claims == nil {
		cp.Claims = map[string]CheckpointEntry{}
	}
	return cp.Claims, nil
}

// checkpointFile reads the plugin's checkpoint file on the host; nil when there is none.
func (e *Env) checkpointFile() ([]byte, error) {
	h, err := e.host()
	if err != nil {
		return nil, err
	}
	data, err := h.ReadFile(filepath.Join(e.PluginDataDir(), "checkpoint.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// CDISpecs returns the driver's CDI spec files on the host.
func (e *Env) CDISpecs() ([]string, error) {
	h, err := e.host()
	if err != nil {
		return nil, err
	}
	entries, err := h.ReadDir(e.CDIDir())
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ent := range entries {
		if strings.HasPrefix(ent.Name(), "k8s.rdma.dra.io-hca_") {
			out = append(out, filepath.Join(e.CDIDir(), ent.Name()))
		}
	}
	return out, nil
}

// CDISpecFor returns the spec file path of a claim UID (it may not exist).
func (e *Env) CDISpecFor(uid string) string {
	return filepath.Join(e.CDIDir(), "k8s.rdma.dra.io-hca_"+uid+".json")
}

// WarningEvents returns "reason: message" of the Warning events of an object kind in ns
// whose reason contains substr.
func (e *Env) WarningEvents(ctx context.Context, ns, substr string) ([]string, error) {
	evs, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Reason, substr) {
			out = append(out, ev.InvolvedObject.Name+": "+ev.Reason+": "+ev.Message)
		}
	}
	return out, nil
}

// ReleaseInstalled reports whether the driver's release exists.
func (e *Env) ReleaseInstalled(ctx context.Context) bool {
	_, err := e.Client.AppsV1().DaemonSets(Namespace).Get(ctx, DaemonSet, metav1.GetOptions{})
	return err == nil || !apierrors.IsNotFound(err)
}

// AllocatedClaims lists namespace/name of every claim that holds devices of the driver;
// the suite needs a node whose ports are all free.
func (e *Env) AllocatedClaims(ctx context.Context) ([]string, error) {
	claims, err := e.Client.ResourceV1().ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, c := range claims.Items {
		if c.Status.Allocation == nil {
			continue
		}
		for _, r := range c.Status.Allocation.Devices.Results {
			if r.Driver == DriverName {
				out = append(out, c.Namespace+"/"+c.Name)
				break
			}
		}
	}
	return out, nil
}

package framework

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// ReportScript prints what the container sees, then a marker, then stays up.
const ReportScript = `env | grep -E '^(NCCL|UCX|RDMA|MOCK_GPU)_' | sort; echo "--- /dev/infiniband"; ls -l /dev/infiniband 2>&1; echo "--- end"; exec sleep 86400`

// NewNamespace creates a namespace for one test and deletes it (waiting for its pods to be
// gone, so their claims are deallocated) when the test ends.
func (e *Env) NewNamespace(t *testing.T, prefix string) string {
	t.Helper()
	ctx := Context(t, time.Minute)
	ns, err := e.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-" + prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		if t.Failed() {
			e.DumpNamespace(t, ctx, ns.Name)
		}
		_ = e.Client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{})
		// Until the namespace is gone its pods may hold claims, and the next test would
		// find ports taken: a namespace that stays is this test's failure, with what
		// is left in it.
		err := Poll(ctx, 3*time.Minute, time.Second, func(ctx context.Context) error {
			_, err := e.Client.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("namespace %s still there (%v)", ns.Name, err)
		})
		if err != nil {
			t.Errorf("delete namespace: %v", err)
			pods, err := e.Client.CoreV1().Pods(ns.Name).List(ctx, metav1.ListOptions{})
			if err != nil {
				return
			}
			for _, p := range pods.Items {
				t.Errorf("left in %s: %s", ns.Name, e.Diagnose(ctx, ns.Name, p.Name, errors.New("pod not gone with its namespace")))
			}
		}
	})
	return ns.Name
}

// DumpNamespace logs the pods, claims and events of a namespace, for a failed test, and
// the plugin's last log lines but those of the health stream to the kubelet (at the
// suite's verbosity every report is logged, and they would crowd out the rest).
func (e *Env) DumpNamespace(t *testing.T, ctx context.Context, ns string) {
	for _, args := range [][]string{
		{"get", "pods,resourceclaims", "-o", "wide", "-n", ns},
		{"get", "events", "-n", ns, "--sort-by=.lastTimestamp"},
		{"-n", Namespace, "logs", "daemonset/" + DaemonSet, "--tail=400"},
	} {
		out, _ := e.Kubectl(ctx, args...)
		if args[2] == "logs" {
			var kept []string
			for _, line := range strings.Split(out, "\n") {
				if !strings.Contains(line, "stream message") {
					kept = append(kept, line)
				}
			}
			out = strings.Join(kept[max(0, len(kept)-40):], "\n")
		}
		t.Logf("kubectl %s:\n%s", strings.Join(args, " "), out)
	}
}

// Request is one device request of a claim.
type Request struct {
	Name  string
	Class string
	// CEL selects devices; empty: any of the class.
	CEL string
	// Count is the number of devices; 0 means 1.
	Count int64
	// Shares requests rdma.dra.io/shares capacity; 0: the class default.
	Shares int64
	// FirstAvailable holds alternatives instead of Class (prioritized list).
	FirstAvailable []Request
}

// ClaimSpec builds a claim spec from requests, with optional matchAttribute constraints
// over all requests and opaque configs.
func ClaimSpec(reqs []Request, matchAttribute string, configs ...resourceapi.DeviceClaimConfiguration) resourceapi.ResourceClaimSpec {
	var spec resourceapi.ResourceClaimSpec
	for _, r := range reqs {
		dr := resourceapi.DeviceRequest{Name: r.Name}
		if len(r.FirstAvailable) > 0 {
			for _, sub := range r.FirstAvailable {
				e := exact(sub)
				dr.FirstAvailable = append(dr.FirstAvailable, resourceapi.DeviceSubRequest{
					Name: sub.Name, DeviceClassName: e.DeviceClassName, Selectors: e.Selectors,
					AllocationMode: e.AllocationMode, Count: e.Count, Capacity: e.Capacity,
				})
			}
		} else {
			dr.Exactly = ptr.To(exact(r))
		}
		spec.Devices.Requests = append(spec.Devices.Requests, dr)
	}
	if matchAttribute != "" {
		spec.Devices.Constraints = []resourceapi.DeviceConstraint{{MatchAttribute: ptr.To(resourceapi.FullyQualifiedName(matchAttribute))}}
	}
	spec.Devices.Config = configs
	return spec
}

func exact(r Request) resourceapi.ExactDeviceRequest {
	e := resourceapi.ExactDeviceRequest{DeviceClassName: r.Class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: 1}
	if r.Count > 0 {
		e.Count = r.Count
	}
	if r.CEL != "" {
		e.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{Expression: r.CEL}}}
	}
	if r.Shares > 0 {
		e.Capacity = &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
			"rdma.dra.io/shares": *resource.NewQuantity(r.Shares, resource.DecimalSI),
		}}
	}
	return e
}

// OnPort is CEL selecting one port by RDMA device name.
func OnPort(ibdev string) string {
	return fmt.Sprintf(`device.attributes["rdma.dra.io"].ibdev == %q && device.attributes["rdma.dra.io"].port == 1`, ibdev)
}

// OpaqueConfig is a claim config entry with raw RdmaConfig JSON.
func OpaqueConfig(json string, requests ...string) resourceapi.DeviceClaimConfiguration {
	return resourceapi.DeviceClaimConfiguration{Requests: requests, DeviceConfiguration: resourceapi.DeviceConfiguration{
		Opaque: &resourceapi.OpaqueDeviceConfiguration{Driver: DriverName, Parameters: runtime.RawExtension{Raw: []byte(json)}},
	}}
}

// CreateClaimTemplate creates a ResourceClaimTemplate.
func (e *Env) CreateClaimTemplate(t *testing.T, ns, name string, spec resourceapi.ResourceClaimSpec) {
	t.Helper()
	_, err := e.Client.ResourceV1().ResourceClaimTemplates(ns).Create(Context(t, 30*time.Second), &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       resourceapi.ResourceClaimTemplateSpec{Spec: spec},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ResourceClaimTemplate %s/%s: %v", ns, name, err)
	}
}

// ReportPod returns a pod that runs ReportScript with a claim from template (if set).
func ReportPod(ns, name, template string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Containers: []corev1.Container{{
				Name: "toolbox", Image: ToolboxImage, ImagePullPolicy: corev1.PullNever,
				Command: []string{"sh", "-c", ReportScript},
			}},
		},
	}
	if template != "" {
		pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "rdma", ResourceClaimTemplateName: ptr.To(template)}}
		pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "rdma"}}
	}
	return pod
}

// CreateClaim creates a ResourceClaim and returns its name.
func (e *Env) CreateClaim(t *testing.T, ns, name string, spec resourceapi.ResourceClaimSpec) string {
	t.Helper()
	_, err := e.Client.ResourceV1().ResourceClaims(ns).Create(Context(t, 30*time.Second), &resourceapi.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: spec,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ResourceClaim %s/%s: %v", ns, name, err)
	}
	return name
}

// WithClaim makes the pod use the existing ResourceClaim claim as "rdma".
func WithClaim(pod *corev1.Pod, claim string) *corev1.Pod {
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "rdma", ResourceClaimName: ptr.To(claim)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "rdma"}}
	return pod
}

// WithExtendedResource makes the pod ask for n of an extended resource, as a pod written for
// a device plugin does.
func WithExtendedResource(pod *corev1.Pod, name string, n int64) *corev1.Pod {
	q := *resource.NewQuantity(n, resource.DecimalSI)
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceName(name): q}
	return pod
}

// CreatePod creates pod.
func (e *Env) CreatePod(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.Client.CoreV1().Pods(pod.Namespace).Create(Context(t, 30*time.Second), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// DeletePod deletes a pod and waits until it is gone.
func (e *Env) DeletePod(t *testing.T, ns, name string) {
	t.Helper()
	ctx := Context(t, 2*time.Minute)
	if err := e.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatalf("delete pod %s/%s: %v", ns, name, err)
	}
	// The kubelet unprepares the pod's claims before the pod goes away, so a pod that
	// stays is often a driver that does not unprepare.
	_, err := e.WaitPod(ctx, ns, name, 2*time.Minute, func(*corev1.Pod) (bool, error) { return false, nil })
	if !errors.Is(err, errPodGone) {
		e.FailPod(t, ns, name, fmt.Errorf("pod not gone after it was deleted: %w", err))
	}
}

// Report is what a ReportPod's container printed.
type Report struct {
	Env map[string]string
	// Devices maps a name in /dev/infiniband to "c major,minor".
	Devices map[string]string
	Raw     string
}

var lsLine = regexp.MustCompile(`^([cb])\S+\s+\d+\s+\S+\s+\S+\s+(\d+),\s*(\d+)\s+.*\s(\S+)$`)

// ParseReport parses ReportScript's output.
func ParseReport(out string) Report {
	r := Report{Env: map[string]string{}, Devices: map[string]string{}, Raw: out}
	section := "env"
	for _, line := range strings.Split(out, "\n") {
		switch line {
		case "--- /dev/infiniband":
			section = "dev"
			continue
		case "--- end":
			section = "done"
			continue
		}
		switch section {
		case "env":
			if k, v, ok := strings.Cut(line, "="); ok {
				r.Env[k] = v
			}
		case "dev":
			if m := lsLine.FindStringSubmatch(line); m != nil {
				r.Devices[m[4]] = fmt.Sprintf("%s %s,%s", m[1], m[2], m[3])
			}
		}
	}
	return r
}

var envLine = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(.*)$`)

// ParseLogs reads what any workload printed with `env` and `ls -l /dev/infiniband`, in any
// order and without ReportScript's markers (the demo workloads print that way).
func ParseLogs(out string) Report {
	r := Report{Env: map[string]string{}, Devices: map[string]string{}, Raw: out}
	for _, line := range strings.Split(out, "\n") {
		if m := envLine.FindStringSubmatch(line); m != nil {
			r.Env[m[1]] = m[2]
		} else if m := lsLine.FindStringSubmatch(line); m != nil {
			r.Devices[m[4]] = fmt.Sprintf("%s %s,%s", m[1], m[2], m[3])
		}
	}
	return r
}

// DeviceNames returns the sorted names in the /dev/infiniband listing.
func (r Report) DeviceNames() []string {
	var out []string
	for n := range r.Devices {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// WaitReport waits for the pod to run and then for its container to have printed the
// whole report, and returns the report. The pod is judged by its status; its log is read
// with retries (see WaitLogs). On failure the test ends with the pod's diagnosis.
func (e *Env) WaitReport(t *testing.T, ns, name string) Report {
	t.Helper()
	ctx := Context(t, 6*time.Minute)
	if _, err := e.WaitPod(ctx, ns, name, 3*time.Minute, Running); err != nil {
		e.FailPod(t, ns, name, fmt.Errorf("pod did not run: %w", err))
	}
	logs, err := e.WaitLogs(ctx, ns, name, 2*time.Minute, false, ReportComplete)
	if err != nil {
		e.FailPod(t, ns, name, fmt.Errorf("report of the running pod: %w", err))
	}
	return ParseReport(logs)
}

// ReportComplete accepts the output of ReportScript once it reached its end marker.
func ReportComplete(logs string) error {
	if !strings.Contains(logs, "--- end") {
		return errors.New("report incomplete")
	}
	return nil
}

// StaysPending checks that the pod is not scheduled for d: first the scheduler must have
// looked at it (PodScheduled False), then it must stay without a node for d. A pod that
// gets a node is allocated devices the node should not have had free: the test ends with
// its diagnosis.
func (e *Env) StaysPending(t *testing.T, ns, name string, d time.Duration) {
	t.Helper()
	ctx := Context(t, d+2*time.Minute)
	_, err := e.WaitPod(ctx, ns, name, time.Minute, func(pod *corev1.Pod) (bool, error) {
		if pod.Spec.NodeName != "" {
			return false, fmt.Errorf("%w: on %s", ErrUnexpectedAllocation, pod.Spec.NodeName)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.FailPod(t, ns, name, fmt.Errorf("pod unschedulable: %w", err))
	}
	if d <= 0 {
		return
	}
	_, err = e.WaitPod(ctx, ns, name, d, func(pod *corev1.Pod) (bool, error) {
		if pod.Spec.NodeName != "" {
			return false, fmt.Errorf("%w: on %s within %s", ErrUnexpectedAllocation, pod.Spec.NodeName, d)
		}
		return false, nil
	})
	if !wait.Interrupted(err) {
		e.FailPod(t, ns, name, err)
	}
}

// PodClaim returns the ResourceClaim generated for the pod's claim "rdma", once allocated.
func (e *Env) PodClaim(t *testing.T, ns, pod string) *resourceapi.ResourceClaim {
	t.Helper()
	ctx := Context(t, time.Minute)
	var claim *resourceapi.ResourceClaim
	err := Poll(ctx, time.Minute, time.Second, func(ctx context.Context) error {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			c, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c.Status.Allocation == nil {
				return errors.New("not allocated")
			}
			claim = c
			return nil
		}
		if x := p.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName != "" {
			c, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, x.ResourceClaimName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if c.Status.Allocation == nil {
				return errors.New("not allocated")
			}
			claim = c
			return nil
		}
		return errors.New("no claim status yet")
	})
	if err != nil {
		e.FailPod(t, ns, pod, fmt.Errorf("claim of the pod: %w", err))
	}
	return claim
}

// AllocatedDevices returns "request=device" of each allocation result, in order.
func AllocatedDevices(c *resourceapi.ResourceClaim) []string {
	var out []string
	if c.Status.Allocation == nil {
		return nil
	}
	for _, r := range c.Status.Allocation.Devices.Results {
		out = append(out, r.Request+"="+r.Device)
	}
	return out
}

// ExpectTemplateRefused creates a ResourceClaimTemplate named name with spec in ns until
// the API server refuses it with a message that contains every one of wants; a template
// that is admitted is deleted and tried again, since the webhook may still be starting
// after an install. After timeout it returns the last answer as an error ("admitted", or
// a refusal without wants).
func (e *Env) ExpectTemplateRefused(ctx context.Context, timeout time.Duration, ns, name string, spec resourceapi.ResourceClaimSpec, wants ...string) error {
	return Poll(ctx, timeout, 2*time.Second, func(ctx context.Context) error {
		_, err := e.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec},
		}, metav1.CreateOptions{})
		if err == nil {
			_ = e.Client.ResourceV1().ResourceClaimTemplates(ns).Delete(ctx, name, metav1.DeleteOptions{})
			return errors.New("admitted")
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				return err
			}
		}
		return nil
	})
}

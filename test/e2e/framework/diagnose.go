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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
)

// Verdict says whose fault a failed wait on a pod was, as far as the evidence tells.
type Verdict string

// Verdicts, loud in the test output.
const (
	// DriverFault: the plugin refused or failed a prepare, logged an error for the claim,
	// the runtime could not resolve the claim's CDI devices, the container saw other
	// devices than its claim holds, or a pod got devices that should not have been free.
	DriverFault Verdict = "DRIVER FAULT"
	// EnvironmentHiccup: the cluster around the driver stumbled (a kubelet that was not
	// answering or had not registered the plugin yet, a node that went NotReady, a sandbox
	// the runtime could not create, devices held by another test's leftovers) and
	// nothing points at the driver.
	EnvironmentHiccup Verdict = "ENVIRONMENT HICCUP"
	// Undetermined: neither; the evidence is printed for a human.
	Undetermined Verdict = "UNDETERMINED"
)

// Evidence is what the suite gathers about a pod when a wait on it failed.
type Evidence struct {
	// Failure is what the wait returned.
	Failure error
	// Pod is the pod as it is now; nil with PodErr when it could not be read.
	Pod    *corev1.Pod
	PodErr error
	// Events are the events of the pod and its claims, oldest first.
	Events []corev1.Event
	Claims []ClaimEvidence
	// Plugins are the driver's kubelet plugin pods with their log lines about the claims.
	Plugins []PluginEvidence
	// Node is the cluster's node; nil when it could not be read.
	Node *corev1.Node
	// Leftovers are claims of other namespaces that hold devices of the driver, looked
	// up when the pod was not scheduled.
	Leftovers []string
}

// ClaimEvidence is one ResourceClaim of the pod.
type ClaimEvidence struct {
	Name        string
	UID         types.UID
	Allocated   []string
	ReservedFor int
	Err         error
}

// PluginEvidence is one plugin pod and what it logged about the claims (current and
// previous container).
type PluginEvidence struct {
	Pod     string
	Status  string
	Running bool
	Lines   []string
	LogErrs []error
}

// Diagnosis is the verdict on a failed wait, why, and the evidence.
type Diagnosis struct {
	Namespace, Name string
	Verdict         Verdict
	Why             []string
	Evidence        Evidence
}

// pluginLinesKept bounds the plugin log lines of a diagnosis (the latest are kept), and
// pluginLineChars each line: at the suite's verbosity a line holds a whole gRPC request.
const (
	pluginLinesKept = 40
	pluginLineChars = 600
)

// FailPod ends the test with err and the diagnosis of the pod.
func (e *Env) FailPod(t *testing.T, ns, name string, err error) {
	t.Helper()
	t.Fatal(e.Diagnose(context.Background(), ns, name, err).String())
}

// Diagnose gathers the evidence about the pod after a wait on it failed with failure, and
// classifies it. It reads with its own bounded retries, since it may run during the very
// hiccup that failed the wait.
func (e *Env) Diagnose(ctx context.Context, ns, name string, failure error) Diagnosis {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	ev := Evidence{Failure: failure}
	gone := false
	ev.PodErr = Poll(ctx, 20*time.Second, time.Second, func(ctx context.Context) error {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			gone = true
		case err != nil:
			return err
		default:
			ev.Pod = p
		}
		return nil
	})
	if gone {
		ev.PodErr = errPodGone
	}
	names := []string{name}
	if ev.Pod != nil {
		for _, claim := range podClaimNames(ev.Pod) {
			c := ClaimEvidence{Name: claim}
			got, err := e.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claim, metav1.GetOptions{})
			if err != nil {
				c.Err = err
			} else {
				c.UID, c.Allocated, c.ReservedFor = got.UID, AllocatedDevices(got), len(got.Status.ReservedFor)
			}
			ev.Claims = append(ev.Claims, c)
			names = append(names, claim)
		}
	}
	ev.Events = e.objectEvents(ctx, ns, names)
	ev.Plugins = e.pluginEvidence(ctx, ns, ev.Claims)
	if node, err := e.Client.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{}); err == nil {
		ev.Node = node
	}
	if ev.Pod != nil && !podScheduled(ev.Pod) {
		held, _ := e.AllocatedClaims(ctx)
		for _, c := range held {
			if !strings.HasPrefix(c, ns+"/") {
				ev.Leftovers = append(ev.Leftovers, c)
			}
		}
	}
	verdict, why := Classify(ev)
	return Diagnosis{Namespace: ns, Name: name, Verdict: verdict, Why: why, Evidence: ev}
}

// podClaimNames are the names of the ResourceClaims the pod uses, generated ones included.
func podClaimNames(pod *corev1.Pod) []string {
	var out []string
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.ResourceClaimName != nil {
			out = append(out, *s.ResourceClaimName)
		}
	}
	for _, c := range pod.Spec.ResourceClaims {
		if c.ResourceClaimName != nil {
			out = append(out, *c.ResourceClaimName)
		}
	}
	if x := pod.Status.ExtendedResourceClaimStatus; x != nil && x.ResourceClaimName != "" {
		out = append(out, x.ResourceClaimName)
	}
	return out
}

func podScheduled(pod *corev1.Pod) bool {
	return pod.Spec.NodeName != ""
}

// objectEvents lists the events of the named objects in ns, oldest first.
func (e *Env) objectEvents(ctx context.Context, ns string, names []string) []corev1.Event {
	var out []corev1.Event
	for _, n := range names {
		list, err := e.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.name", n).String(),
		})
		if err != nil {
			continue
		}
		out = append(out, list.Items...)
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(out[i]).Before(eventTime(out[j])) })
	return out
}

func eventTime(ev corev1.Event) time.Time {
	switch {
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	}
	return ev.CreationTimestamp.Time
}

// pluginEvidence reads every plugin pod's log (and its previous container's) and keeps
// the lines that name one of the claims, by UID or namespace/name.
func (e *Env) pluginEvidence(ctx context.Context, ns string, claims []ClaimEvidence) []PluginEvidence {
	pods, err := e.Client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=kubelet-plugin"})
	if err != nil {
		return []PluginEvidence{{Pod: "(plugin pods)", LogErrs: []error{err}}}
	}
	var needles []string
	for _, c := range claims {
		needles = append(needles, ns+"/"+c.Name)
		if c.UID != "" {
			needles = append(needles, string(c.UID))
		}
	}
	var out []PluginEvidence
	for _, p := range pods.Items {
		pe := PluginEvidence{Pod: p.Name, Status: PodSummary(&p), Running: p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil}
		if !p.CreationTimestamp.IsZero() {
			pe.Status = "created " + p.CreationTimestamp.UTC().Format(time.TimeOnly) + ", " + pe.Status
		}
		if len(needles) > 0 {
			previous := len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].RestartCount > 0
			for _, prev := range []bool{true, false} {
				if prev && !previous {
					continue
				}
				logs, err := e.readLog(ctx, Namespace, p.Name, &corev1.PodLogOptions{Previous: prev}, 20*time.Second)
				if err != nil {
					pe.LogErrs = append(pe.LogErrs, fmt.Errorf("previous=%v: %w", prev, err))
					continue
				}
				pe.Lines = append(pe.Lines, grepLines(logs, needles)...)
			}
		}
		if len(pe.Lines) > pluginLinesKept {
			pe.Lines = pe.Lines[len(pe.Lines)-pluginLinesKept:]
		}
		out = append(out, pe)
	}
	return out
}

// readLog reads a log, retrying a failed read for up to timeout.
func (e *Env) readLog(ctx context.Context, ns, pod string, opts *corev1.PodLogOptions, timeout time.Duration) (string, error) {
	var logs string
	err := Poll(ctx, timeout, time.Second, func(ctx context.Context) error {
		b, err := e.Client.CoreV1().Pods(ns).GetLogs(pod, opts).DoRaw(ctx)
		logs = string(b)
		return err
	})
	return logs, err
}

// grepLines returns the lines of logs that contain one of needles, each cut to
// pluginLineChars.
func grepLines(logs string, needles []string) []string {
	var out []string
	for _, line := range strings.Split(logs, "\n") {
		for _, n := range needles {
			if strings.Contains(line, n) {
				if len(line) > pluginLineChars {
					line = line[:pluginLineChars] + " ..."
				}
				out = append(out, line)
				break
			}
		}
	}
	return out
}

var (
	// klogError is an error line of klog's text format ("E1124 05:00:00.000000 ..."),
	// the chart's default (JSON lines carry "err" at info level too, for retries).
	klogError = regexp.MustCompile(`^E\d{4} `)
	// prepareError is a per-claim error in a logged gRPC response, which prints in
	// protobuf text format inside klog's quoting: value:{error:\"refused ...\"}. An empty
	// error is not printed at all.
	prepareError = regexp.MustCompile(`\berror:(\\?")?[^,}\s"\\]`)
)

// Classify weighs the evidence: any sign of the driver failing makes it a driver fault;
// otherwise a sign of the environment stumbling makes it an environment hiccup; otherwise
// it is undetermined. The reasons quote the evidence they rest on.
func Classify(ev Evidence) (Verdict, []string) {
	var driver, env []string
	if errors.Is(ev.Failure, ErrWrongDevices) {
		driver = append(driver, "the container ran and saw other devices than its claim holds")
	}
	if errors.Is(ev.Failure, ErrUnexpectedAllocation) {
		driver = append(driver, "the scheduler found devices for a claim that the published ports should not have had free")
	}
	pluginRunning := false
	for _, p := range ev.Plugins {
		pluginRunning = pluginRunning || p.Running
		for _, l := range p.Lines {
			if klogError.MatchString(l) || prepareError.MatchString(l) {
				driver = append(driver, "plugin "+p.Pod+" logged an error for the claim: "+l)
			}
		}
	}
	for _, e := range ev.Events {
		if e.Type != corev1.EventTypeWarning {
			continue
		}
		what := fmt.Sprintf("event %s at %s: %s", e.Reason, eventTime(e).UTC().Format(time.TimeOnly), e.Message)
		switch {
		case strings.Contains(e.Message, "is not registered") && pluginRunning:
			env = append(env, "the kubelet had not registered the running plugin yet (it re-registers plugins after its own restart): "+what)
		case strings.Contains(e.Message, "is not registered"):
			driver = append(driver, "no plugin pod runs to register with the kubelet: "+what)
		case strings.HasPrefix(e.Reason, "FailedPrepare"), strings.HasPrefix(e.Reason, "FailedUnprepare"):
			driver = append(driver, "the kubelet's call to the plugin failed: "+what)
		case strings.Contains(e.Message, "CDI"):
			driver = append(driver, "the container runtime could not use the claim's CDI devices: "+what)
		case e.Reason == "FailedCreatePodSandBox", e.Reason == "FailedKillPod", e.Reason == "NodeNotReady",
			e.Reason == "FailedMount", e.Reason == "Evicted", e.Reason == "Preempting", e.Reason == "ErrImageNeverPull":
			env = append(env, what)
		}
	}
	if p := ev.Pod; p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			for _, msg := range []string{waitingMessage(cs), terminatedMessage(cs)} {
				if strings.Contains(msg, "CDI") {
					driver = append(driver, "container "+cs.Name+": "+msg)
				}
			}
		}
		if p.Status.Reason == "UnexpectedAdmissionError" || p.Status.Reason == "NodeShutdown" || p.Status.Reason == "Evicted" {
			env = append(env, fmt.Sprintf("the kubelet rejected or evicted the pod: %s %q", p.Status.Reason, p.Status.Message))
		}
		if transient(ev.Failure) && podWell(p) {
			env = append(env, "the pod is well ("+PodSummary(p)+"); only reading from the API server or the kubelet failed: "+ev.Failure.Error())
		}
		if !podScheduled(p) && len(ev.Leftovers) > 0 {
			env = append(env, fmt.Sprintf("claims of other namespaces hold devices of the driver (leftovers of another test?): %v", ev.Leftovers))
		}
	} else if transient(ev.PodErr) {
		env = append(env, "the API server did not answer: "+ev.PodErr.Error())
	}
	if n := ev.Node; n != nil {
		for _, c := range n.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			switch {
			case c.Status != corev1.ConditionTrue:
				env = append(env, fmt.Sprintf("node %s is not Ready: %s %q since %s", n.Name, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.TimeOnly)))
			case ev.Pod != nil && c.LastTransitionTime.After(ev.Pod.CreationTimestamp.Time):
				env = append(env, fmt.Sprintf("node %s became Ready again at %s, after the pod was created", n.Name, c.LastTransitionTime.UTC().Format(time.TimeOnly)))
			}
		}
	}
	switch {
	case len(driver) > 0:
		return DriverFault, append(driver, env...)
	case len(env) > 0:
		return EnvironmentHiccup, env
	}
	return Undetermined, []string{"no sign of a driver fault nor of an environment hiccup; read the status and the logs below"}
}

func waitingMessage(cs corev1.ContainerStatus) string {
	if w := cs.State.Waiting; w != nil {
		return w.Reason + ": " + w.Message
	}
	return ""
}

func terminatedMessage(cs corev1.ContainerStatus) string {
	if t := cs.State.Terminated; t != nil {
		return t.Reason + ": " + t.Message
	}
	return ""
}

// podWell says the pod is where a test would want it: running, or done with exit code 0.
func podWell(pod *corev1.Pod) bool {
	if ok, _ := Running(pod); ok {
		return true
	}
	return ExitedCleanly(pod) == nil
}

// transient says err is the API server or the kubelet behind it not answering, rather
// than an answer.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) ||
		apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	msg := err.Error()
	for _, s := range []string{"an error on the server", "connection refused", "connection reset", "i/o timeout", "EOF",
		"http2: client connection lost", "TLS handshake timeout", "context deadline exceeded"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// String is the verdict first, then why, then the evidence.
func (d Diagnosis) String() string {
	var b strings.Builder
	ev := d.Evidence
	fmt.Fprintf(&b, "pod %s/%s: %s\n", d.Namespace, d.Name, d.Verdict)
	for _, w := range d.Why {
		fmt.Fprintf(&b, "  because: %s\n", w)
	}
	fmt.Fprintf(&b, "  failure: %v\n", ev.Failure)
	if ev.Pod != nil {
		fmt.Fprintf(&b, "  pod (created %s, node %q): %s\n", ev.Pod.CreationTimestamp.UTC().Format(time.TimeOnly), ev.Pod.Spec.NodeName, PodSummary(ev.Pod))
	} else {
		fmt.Fprintf(&b, "  pod: %v\n", ev.PodErr)
	}
	for _, e := range ev.Events {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(&b, "  event %s %s %s%s on %s: %s\n", eventTime(e).UTC().Format(time.TimeOnly), e.Type, e.Reason, count, e.InvolvedObject.Name, e.Message)
	}
	for _, c := range ev.Claims {
		if c.Err != nil {
			fmt.Fprintf(&b, "  claim %s: %v\n", c.Name, c.Err)
			continue
		}
		fmt.Fprintf(&b, "  claim %s uid %s: allocated %v, reserved for %d\n", c.Name, c.UID, c.Allocated, c.ReservedFor)
	}
	if len(ev.Leftovers) > 0 {
		fmt.Fprintf(&b, "  claims of other namespaces holding devices: %v\n", ev.Leftovers)
	}
	for _, p := range ev.Plugins {
		fmt.Fprintf(&b, "  plugin pod %s (%s): %d log lines about the claims\n", p.Pod, p.Status, len(p.Lines))
		for _, err := range p.LogErrs {
			fmt.Fprintf(&b, "    (log not read: %v)\n", err)
		}
		for _, l := range p.Lines {
			fmt.Fprintf(&b, "    %s\n", l)
		}
	}
	if n := ev.Node; n != nil {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				fmt.Fprintf(&b, "  node %s Ready=%s since %s, last heartbeat %s\n", n.Name, c.Status,
					c.LastTransitionTime.UTC().Format(time.TimeOnly), c.LastHeartbeatTime.UTC().Format(time.TimeOnly))
			}
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

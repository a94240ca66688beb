package framework

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Waiting for pods. A pod is judged by its status in the API server (phase, container
// states, exit codes); what it printed is read afterwards, with retries, because a log
// request goes through the API server to the node's kubelet, and while the kubelet
// restarts it fails ("an error on the server ... has prevented the request from
// succeeding") although nothing happened to the pod. A failed request is never the pod's
// failure; only the pod's status or a log read that keeps failing past its bound is.

// ErrWrongDevices marks a failure where the container ran but did not see what its claim
// holds: the driver's fault whatever else happened.
var ErrWrongDevices = errors.New("container saw other devices than its claim holds")

// ErrUnexpectedAllocation marks a pod that was scheduled although no device the driver
// publishes should have been free for it: the driver offered more than the port has.
var ErrUnexpectedAllocation = errors.New("pod was scheduled; want it Pending")

// errPodGone ends a wait: a pod that is not there cannot get anywhere.
var errPodGone = errors.New("pod is gone")

// WaitPod polls the pod every second until done accepts it, and returns the pod as last
// seen. A failed GET is retried until timeout (the API server may be busy); done stops the
// wait early by returning an error, when the pod cannot get where it should any more. An
// error after timeout satisfies wait.Interrupted.
func (e *Env) WaitPod(ctx context.Context, ns, name string, timeout time.Duration, done func(*corev1.Pod) (bool, error)) (*corev1.Pod, error) {
	var (
		pod     *corev1.Pod
		lastErr error
	)
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return false, errPodGone
		case err != nil:
			if ctx.Err() == nil {
				lastErr = fmt.Errorf("get pod: %w", err)
			}
			return false, nil
		}
		pod, lastErr = p, nil
		return done(p)
	})
	switch {
	case err == nil:
		return pod, nil
	case !wait.Interrupted(err):
		return pod, err
	case lastErr != nil:
		return pod, fmt.Errorf("after %s: %w (%w)", timeout, lastErr, err)
	case pod != nil:
		return pod, fmt.Errorf("after %s the pod is still %s (%w)", timeout, PodSummary(pod), err)
	default:
		return nil, fmt.Errorf("after %s: %w", timeout, err)
	}
}

// Running accepts a pod whose containers all run; a pod that ended, or a container that
// exited, will not get there. A container that failed to start (StartError, e.g. a CDI
// hook that holds it back until the pod's network attachment is made) is started again
// by the kubelet unless the pod's restartPolicy is Never, so it is waited for.
func Running(pod *corev1.Pod) (bool, error) {
	switch pod.Status.Phase {
	case corev1.PodSucceeded, corev1.PodFailed:
		return false, fmt.Errorf("pod ended before it ran as expected: %s", PodSummary(pod))
	case corev1.PodRunning:
	default:
		return false, nil
	}
	if len(pod.Status.ContainerStatuses) != len(pod.Spec.Containers) {
		return false, nil
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			if t.Reason == StartError && pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				return false, nil
			}
			return false, fmt.Errorf("container %s exited: %s", cs.Name, PodSummary(pod))
		}
		if cs.State.Running == nil {
			return false, nil
		}
	}
	return true, nil
}

// StartError is the reason of a container that the runtime failed to start.
const StartError = "StartError"

// Finished accepts a pod that ended, either way: the caller judges it with ExitedCleanly.
func Finished(pod *corev1.Pod) (bool, error) {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed, nil
}

// ExitedCleanly says why a finished pod did not succeed: its phase must be Succeeded and
// every container must have terminated with exit code 0.
func ExitedCleanly(pod *corev1.Pod) error {
	if pod.Status.Phase != corev1.PodSucceeded {
		return fmt.Errorf("pod did not succeed: %s", PodSummary(pod))
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t == nil || t.ExitCode != 0 {
			return fmt.Errorf("container %s did not exit 0: %s", cs.Name, PodSummary(pod))
		}
	}
	return nil
}

// WaitLogs reads the log of the pod's (only) container until complete accepts it, and
// returns it. A failed read is retried every second until timeout, whatever the error:
// the kubelet behind it may be restarting. finished says the container has exited, so
// its first successful read is all there will ever be.
func (e *Env) WaitLogs(ctx context.Context, ns, name string, timeout time.Duration, finished bool, complete func(string) error) (string, error) {
	var (
		logs    string
		lastErr error
		reads   int
	)
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		b, err := e.Client.CoreV1().Pods(ns).GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if apierrors.IsNotFound(err) {
			// Either the pod is gone, or the kubelet that answered does not know it (yet):
			// a kubelet that has just restarted answers "pod ... does not exist" until it
			// has loaded its pods again. Only the API server can tell.
			if _, gerr := e.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(gerr) {
				return false, errPodGone
			}
		}
		switch {
		case err != nil:
			if ctx.Err() == nil {
				reads++
				lastErr = fmt.Errorf("read log (%d failed reads): %w", reads, err)
			}
			return false, nil
		}
		logs = string(b)
		if lastErr = complete(logs); lastErr == nil {
			return true, nil
		}
		if finished {
			return false, fmt.Errorf("the container exited and its log is incomplete: %w\n%s", lastErr, logs)
		}
		return false, nil
	})
	switch {
	case err == nil:
		return logs, nil
	case !wait.Interrupted(err):
		return logs, err
	case lastErr != nil:
		return logs, fmt.Errorf("after %s: %w (%w)", timeout, lastErr, err)
	default:
		return logs, fmt.Errorf("after %s: %w", timeout, err)
	}
}

// PodSummary is the pod's status on one line: phase, reason, the conditions that are not
// True and each container's state.
func PodSummary(pod *corev1.Pod) string {
	if pod == nil {
		return "gone"
	}
	s := pod.Status
	parts := []string{"phase " + string(s.Phase)}
	if s.Reason != "" || s.Message != "" {
		parts = append(parts, fmt.Sprintf("reason %s %q", s.Reason, s.Message))
	}
	if pod.DeletionTimestamp != nil {
		parts = append(parts, "terminating")
	}
	for _, c := range s.Conditions {
		if c.Status != corev1.ConditionTrue {
			parts = append(parts, fmt.Sprintf("%s=%s %s %q", c.Type, c.Status, c.Reason, c.Message))
		}
	}
	for _, cs := range s.ContainerStatuses {
		parts = append(parts, "container "+cs.Name+" "+containerState(cs))
	}
	return strings.Join(parts, ", ")
}

func containerState(cs corev1.ContainerStatus) string {
	state := "unknown"
	switch st := cs.State; {
	case st.Running != nil:
		state = "running since " + st.Running.StartedAt.UTC().Format(time.TimeOnly)
	case st.Terminated != nil:
		state = fmt.Sprintf("terminated exit %d %s %q", st.Terminated.ExitCode, st.Terminated.Reason, st.Terminated.Message)
	case st.Waiting != nil:
		state = fmt.Sprintf("waiting %s %q", st.Waiting.Reason, st.Waiting.Message)
	}
	if cs.RestartCount > 0 {
		state += fmt.Sprintf(" (restarts %d)", cs.RestartCount)
	}
	return state
}

// WaitNodeReady waits until the node is Ready by a status that its kubelet posted at
// since or later. After a kubelet restart the Ready condition alone proves nothing: the
// node stays Ready in the API server until the node lifecycle controller notices a
// silent kubelet, which takes longer than the restart. A kubelet posts its status as
// soon as it starts, so a fresh heartbeat is the new kubelet's.
func (e *Env) WaitNodeReady(ctx context.Context, since time.Time) error {
	// Condition times are whole seconds.
	since = since.Truncate(time.Second)
	return Poll(ctx, 3*time.Minute, time.Second, func(ctx context.Context) error {
		node, err := e.Client.CoreV1().Nodes().Get(ctx, e.Node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type != corev1.NodeReady {
				continue
			}
			if c.Status != corev1.ConditionTrue || c.LastHeartbeatTime.Time.Before(since) {
				return fmt.Errorf("node %s Ready=%s, last heartbeat %s, want one at %s or later", e.Node, c.Status,
					c.LastHeartbeatTime.UTC().Format(time.TimeOnly), since.UTC().Format(time.TimeOnly))
			}
			return nil
		}
		return fmt.Errorf("node %s has no Ready condition", e.Node)
	})
}

// execWithRetry runs `kubectl exec` in the pod and returns its output. An exec goes from
// the API server to the node's kubelet like a log request, so a failure to reach the
// kubelet is retried until timeout; a command that ran and failed ("command terminated
// with exit code N") or any other answer is returned at once.
func (e *Env) execWithRetry(ctx context.Context, timeout time.Duration, ns, pod string, cmd ...string) (string, error) {
	var (
		out string
		err error
	)
	pollErr := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		out, err = e.Kubectl(ctx, append([]string{"-n", ns, "exec", pod, "--"}, cmd...)...)
		return err == nil || strings.Contains(out, "command terminated with exit code") || !kubeletUnreachable(out), nil
	})
	if err == nil && pollErr != nil {
		err = pollErr
	}
	return out, err
}

// kubeletUnreachable says kubectl's output is the API server failing to reach the
// kubelet, not an answer from it, or a kubelet that has just restarted and not loaded its
// pods yet ("pod does not exist", for a pod that the caller knows exists).
func kubeletUnreachable(out string) bool {
	for _, s := range []string{"error dialing backend", "an error on the server", "connection refused", "connection reset", "i/o timeout", "pod does not exist"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

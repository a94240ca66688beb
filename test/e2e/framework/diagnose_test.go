package framework

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClassify runs the verdicts on evidence built the way Diagnose finds it, among them
// the failure of issue 18: a pod that succeeded while its log could not be read because
// the kubelet was restarting.
func TestClassify(t *testing.T) {
	created := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	succeeded := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "churn-0-1", CreationTimestamp: metav1.NewTime(created)},
			Spec:       corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "toolbox"}}},
			Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
				Name: "toolbox", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed"}},
			}}},
		}
	}
	pending := func(reason, msg string) *corev1.Pod {
		p := succeeded()
		p.Status = corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "toolbox", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}}}
		return p
	}
	unscheduled := func() *corev1.Pod {
		p := pending("", "")
		p.Spec.NodeName = ""
		return p
	}
	warning := func(reason, msg string) corev1.Event {
		return corev1.Event{Type: corev1.EventTypeWarning, Reason: reason, Message: msg, LastTimestamp: metav1.NewTime(created.Add(time.Second))}
	}
	readyNode := func(since time.Time) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node"}, Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(since),
		}}}}
	}
	kubeletDown := apierrors.NewInternalError(errors.New(`an error on the server ("unknown") has prevented the request from succeeding (get pods churn-0-1)`))
	runningPlugin := []PluginEvidence{{Pod: "plugin-a", Running: true}}

	tests := []struct {
		name string
		ev   Evidence
		want Verdict
		why  string
	}{
		{
			name: "succeeded pod, log unreadable during the kubelet restart",
			ev: Evidence{Failure: fmt.Errorf("log of the pod that succeeded: after 3m0s: read log (9 failed reads): %w", kubeletDown),
				Pod: succeeded(), Plugins: runningPlugin, Node: readyNode(created.Add(-time.Hour))},
			want: EnvironmentHiccup, why: "only reading from the API server or the kubelet failed",
		},
		{
			name: "container saw the wrong devices",
			ev:   Evidence{Failure: fmt.Errorf("%w: NCCL_IB_HCA=\"\"", ErrWrongDevices), Pod: succeeded(), Plugins: runningPlugin},
			want: DriverFault, why: "other devices",
		},
		{
			name: "pod scheduled that should have stayed Pending",
			ev:   Evidence{Failure: fmt.Errorf("%w: on node", ErrUnexpectedAllocation), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin},
			want: DriverFault, why: "should not have had free",
		},
		{
			name: "plugin refused the prepare",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin,
				Events: []corev1.Event{warning("FailedPrepareDynamicResources", "Failed to prepare dynamic resources: prepare claim: refused")}},
			want: DriverFault, why: "the kubelet's call to the plugin failed",
		},
		{
			name: "kubelet had not registered the running plugin again",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin,
				Events: []corev1.Event{warning("FailedPrepareDynamicResources", "Failed to prepare dynamic resources: DRA driver rdma.dra.io is not registered")}},
			want: EnvironmentHiccup, why: "had not registered",
		},
		{
			name: "no plugin running to register",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""),
				Events: []corev1.Event{warning("FailedPrepareDynamicResources", "Failed to prepare dynamic resources: DRA driver rdma.dra.io is not registered")}},
			want: DriverFault, why: "no plugin pod runs",
		},
		{
			name: "CDI device the runtime cannot resolve",
			ev: Evidence{Failure: errors.New("pod did not run"), Plugins: runningPlugin,
				Pod: pending("CreateContainerError", "unresolvable CDI devices k8s.rdma.dra.io/hca=abc-mlx5-0-p1")},
			want: DriverFault, why: "CDI",
		},
		{
			name: "error line of the plugin about the claim",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: []PluginEvidence{{
				Pod: "plugin-a", Running: true, Lines: []string{`E1124 05:00:01.000000       1 prepare.go:166] "Could not roll back a failed preparation" claim="ns/c"`},
			}}},
			want: DriverFault, why: "logged an error",
		},
		{
			name: "per-claim error in the logged prepare response",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: []PluginEvidence{{
				Pod: "plugin-a", Running: true, Lines: []string{`I1124 05:00:01.000000       1 nonblockinggrpcserver.go:161] "handling request succeeded" method="/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources" response="claims:{key:\"u-1\" value:{error:\"prepare claim: refused\"}}"`},
			}}},
			want: DriverFault, why: "logged an error",
		},
		{
			name: "successful prepare response is no error",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Node: readyNode(created.Add(-time.Hour)), Plugins: []PluginEvidence{{
				Pod: "plugin-a", Running: true, Lines: []string{`I1124 05:00:01.000000       1 nonblockinggrpcserver.go:161] "handling request succeeded" response="claims:{key:\"u-1\" value:{devices:{request_names:\"hca\" pool_name:\"n-rdma\" device_name:\"mlx5-0-p1-shared\"}}}"`},
			}}},
			want: Undetermined,
		},
		{
			name: "sandbox the runtime could not create",
			ev: Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin,
				Events: []corev1.Event{warning("FailedCreatePodSandBox", "failed to reserve sandbox name")}},
			want: EnvironmentHiccup, why: "FailedCreatePodSandBox",
		},
		{
			name: "node Ready again after the pod was created",
			ev:   Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin, Node: readyNode(created.Add(time.Minute))},
			want: EnvironmentHiccup, why: "became Ready again",
		},
		{
			name: "unscheduled while another namespace holds devices",
			ev:   Evidence{Failure: errors.New("pod did not run"), Pod: unscheduled(), Plugins: runningPlugin, Leftovers: []string{"e2e-old-x/c"}},
			want: EnvironmentHiccup, why: "leftovers",
		},
		{
			name: "driver evidence wins over a hiccup",
			ev: Evidence{Failure: fmt.Errorf("read log: %w", kubeletDown), Pod: succeeded(), Plugins: runningPlugin,
				Events: []corev1.Event{warning("FailedUnprepareDynamicResources", "unprepare: boom")}},
			want: DriverFault, why: "boom",
		},
		{
			name: "nothing to go by",
			ev:   Evidence{Failure: errors.New("pod did not run"), Pod: pending("ContainerCreating", ""), Plugins: runningPlugin, Node: readyNode(created.Add(-time.Hour))},
			want: Undetermined,
		},
		{
			name: "API server not answering and no pod read",
			ev:   Evidence{Failure: errors.New("pod did not run"), PodErr: apierrors.NewServiceUnavailable("etcd leader changed")},
			want: EnvironmentHiccup, why: "did not answer",
		},
		{
			name: "pod gone is no hiccup",
			ev:   Evidence{Failure: errors.New("pod did not run"), PodErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "x")},
			want: Undetermined,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := Classify(tt.ev)
			if got != tt.want {
				t.Fatalf("verdict %s, want %s; because %q", got, tt.want, why)
			}
			if len(why) == 0 {
				t.Fatal("no reason given")
			}
			if tt.why != "" && !strings.Contains(strings.Join(why, "\n"), tt.why) {
				t.Errorf("reasons %q do not say %q", why, tt.why)
			}
			// The report states the verdict on its first line.
			d := Diagnosis{Namespace: "ns", Name: "p", Verdict: got, Why: why, Evidence: tt.ev}
			if first, _, _ := strings.Cut(d.String(), "\n"); !strings.Contains(first, string(tt.want)) {
				t.Errorf("first line %q lacks the verdict", first)
			}
		})
	}
}

func TestGrepLines(t *testing.T) {
	logs := strings.Join([]string{
		`I1124 05:00:00.1 "handling request" request="claims:{namespace:\"ns\" uid:\"u-1\" name:\"c\"}"`,
		`I1124 05:00:00.2 "Watching RDMA port health"`,
		`I1124 05:00:00.3 "Wrote claim device status" claim="ns/c"`,
		`I1124 05:00:00.4 "Wrote claim device status" claim="ns/c2"`,
		`I1124 05:00:00.5 x` + strings.Repeat("u-1", 400),
	}, "\n")
	got := grepLines(logs, []string{"ns/c\"", "u-1"})
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3: %q", len(got), got)
	}
	if n := len(got[2]); n > pluginLineChars+4 {
		t.Errorf("long line kept at %d characters", n)
	}
}

func TestReportCompleteAndExitedCleanly(t *testing.T) {
	if err := ReportComplete("NCCL_IB_HCA==mlx5_0:1\n--- /dev/infiniband\n"); err == nil {
		t.Error("a report without its end marker passed")
	}
	if err := ReportComplete("--- /dev/infiniband\n--- end\n"); err != nil {
		t.Error(err)
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "toolbox", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}},
	}}}}
	if err := ExitedCleanly(pod); err == nil || !strings.Contains(err.Error(), "exit 1") {
		t.Errorf("ExitedCleanly of a container that exited 1: %v", err)
	}
	pod.Status.ContainerStatuses[0].State.Terminated.ExitCode = 0
	if err := ExitedCleanly(pod); err != nil {
		t.Error(err)
	}
}

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestKubeletRestartAndRollingUpdate lets pods with claims come and go while the kubelet
// restarts and the plugin is updated to another image tag (a rolling update with surge).
// Every pod must run to completion with its device, and no prepare may fail.
func TestKubeletRestartAndRollingUpdate(t *testing.T) {
	env.NeedMockNode(t)
	host := env.NeedHost(t, "restart the kubelet and tag an image in the node's container runtime")
	ctx := framework.Context(t, 15*time.Minute)
	ds, err := env.Client.AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := ds.Spec.Template.Spec.Containers[0].Image
	repo, tag, _ := strings.Cut(image, ":")
	newTag := tag + "-e2e-update"
	// A second tag of the image, as a new release would bring.
	if err := host.TagImage(ctx, image, repo+":"+newTag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares, "image.tag="+tag); err != nil {
			t.Errorf("roll back to %s: %v", tag, err)
			return
		}
		if err := host.RemoveImage(ctx, repo+":"+newTag); err != nil {
			t.Errorf("remove the update's image tag: %v", err)
		}
	})

	ns := env.NewNamespace(t, "churn")
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_0"), Shares: 1}}, ""))
	c := &churn{ns: ns, stop: make(chan struct{})}
	// Two workers, each running short pods one after the other. On a fatal failure
	// below they are cancelled; otherwise they finish their pods when stopped.
	workCtx, cancelWork := context.WithCancel(ctx)
	for w := range 2 {
		c.wg.Add(1)
		go c.work(workCtx, w)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			close(c.stop)
			c.wg.Wait()
		}
	}
	defer func() {
		cancelWork()
		stop()
	}()

	// Each step waits for the churn to finish more pods instead of sleeping, so that
	// pods are in flight across the restart and the update however slow the machine is.
	c.waitFinished(t, ctx, 2, "before the kubelet restart")
	t.Log("restarting the kubelet")
	restarted := time.Now()
	if err := host.RestartKubelet(ctx); err != nil {
		t.Fatalf("restart kubelet: %v", err)
	}
	if err := env.WaitNodeReady(ctx, restarted); err != nil {
		t.Fatalf("node after the kubelet restart: %v", err)
	}
	if err := env.WaitRegistered(ctx); err != nil {
		t.Fatalf("plugin after the kubelet restart: %v", err)
	}
	// Until now the kubelet may refuse a prepare because it has not registered the
	// plugin again; from now on no prepare may fail.
	registered := time.Now()
	t.Logf("the restarted kubelet registered the plugin %v after the restart", registered.Sub(restarted).Round(time.Second))
	c.waitFinished(t, ctx, c.finished()+2, "after the kubelet restart")

	t.Logf("rolling update of the plugin to %s", newTag)
	if err := env.Install(ctx, shares, "image.tag="+newTag); err != nil {
		t.Fatalf("rolling update: %v", err)
	}
	pod, err := env.PluginPod(ctx)
	if err != nil || pod.Spec.Containers[0].Image != repo+":"+newTag {
		t.Errorf("plugin after the update: %v %v", pod, err)
	}
	c.waitFinished(t, ctx, c.finished()+2, "after the rolling update")
	stop()

	ok := 0
	for _, r := range c.results {
		if r.diagnosis == nil {
			ok++
			continue
		}
		t.Errorf("pod %s did not run to completion: %s", r.name, r.diagnosis)
	}
	t.Logf("%d of %d pods ran to completion while the kubelet restarted and the plugin was updated", ok, len(c.results))
	evs, err := env.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs.Items {
		if !strings.HasPrefix(e.Reason, "FailedPrepare") {
			continue
		}
		first, last := e.FirstTimestamp.Time, e.LastTimestamp.Time
		if e.LastTimestamp.IsZero() {
			first, last = e.EventTime.Time, e.EventTime.Time
		}
		// Event times are whole seconds.
		if strings.Contains(e.Message, "is not registered") && !first.Before(restarted.Truncate(time.Second)) && !last.After(registered) {
			t.Logf("expected while the kubelet had not registered the plugin again: %s %s (x%d) at %s: %s", e.InvolvedObject.Name, e.Reason, e.Count, last.UTC().Format(time.TimeOnly), e.Message)
			continue
		}
		t.Errorf("%s: failed prepare: %s (x%d) from %s to %s: %s", framework.DriverFault, e.InvolvedObject.Name, e.Count,
			first.UTC().Format(time.TimeOnly), last.UTC().Format(time.TimeOnly), e.Message)
	}
}

// churn runs short pods with a share of mlx5_0 back to back, in workers, until stopped.
type churn struct {
	ns   string
	stop chan struct{}
	wg   sync.WaitGroup

	mu      sync.Mutex
	results []churnResult
}

// churnResult is one pod: its name and, when it did not run to completion, why.
type churnResult struct {
	name      string
	diagnosis *framework.Diagnosis
}

func (c *churn) work(ctx context.Context, w int) {
	defer c.wg.Done()
	for i := 0; ; i++ {
		select {
		case <-c.stop:
			return
		case <-ctx.Done():
			return
		default:
		}
		name := fmt.Sprintf("churn-%d-%d", w, i)
		r := churnResult{name: name}
		err := runToCompletion(ctx, c.ns, name)
		if err != nil && ctx.Err() != nil {
			// Cancelled: the test failed already and does not wait for this pod.
			return
		}
		if err != nil {
			d := env.Diagnose(ctx, c.ns, name, err)
			r.diagnosis = &d
		}
		// The pod goes away in the background; the next one may wait for its share.
		_ = env.Client.CoreV1().Pods(c.ns).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
		c.mu.Lock()
		c.results = append(c.results, r)
		c.mu.Unlock()
	}
}

func (c *churn) finished() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.results)
}

// waitFinished waits until n pods have finished, well or not: the churn goes on. Each pod
// is bounded by runToCompletion, so a churn that stops finishing pods is a failure.
func (c *churn) waitFinished(t *testing.T, ctx context.Context, n int, when string) {
	t.Helper()
	framework.Eventually(t, ctx, 10*time.Minute, time.Second, fmt.Sprintf("%d churn pods finished %s", n, when), func(context.Context) error {
		if got := c.finished(); got < n {
			return fmt.Errorf("%d finished", got)
		}
		return nil
	})
}

// runToCompletion runs a pod that reports and exits, waits until it finished, and checks
// by its status that it succeeded and then by its log what it saw. The log is read with
// retries: the kubelet that serves it may be restarting.
//
// The pod restarts on failure: a kubelet restart cancels the runtime calls in flight, and
// a container whose start it cancelled (StartError "context canceled") would fail a
// restartPolicy Never pod, which is Kubernetes' doing, not the driver's. The container
// only ever exits 0, so the one restart allowed is of a container that never ran.
func runToCompletion(ctx context.Context, ns, name string) error {
	pod := framework.ReportPod(ns, name, "share")
	pod.Spec.RestartPolicy = corev1.RestartPolicyOnFailure
	pod.Spec.Containers[0].Command = []string{"sh", "-c", strings.Replace(framework.ReportScript, "exec sleep 86400", "exit 0", 1)}
	if _, err := env.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create: %w", err)
	}
	done, err := env.WaitPod(ctx, ns, name, 4*time.Minute, framework.Finished)
	if err != nil {
		return fmt.Errorf("pod did not finish: %w", err)
	}
	if err := framework.ExitedCleanly(done); err != nil {
		return err
	}
	for _, cs := range done.Status.ContainerStatuses {
		if cs.RestartCount == 0 {
			continue
		}
		if last := cs.LastTerminationState.Terminated; last == nil || last.Reason != framework.StartError {
			return fmt.Errorf("container %s restarted after it ran (last state %+v); it only ever exits 0", cs.Name, cs.LastTerminationState)
		}
	}
	logs, err := env.WaitLogs(ctx, ns, name, 3*time.Minute, true, framework.ReportComplete)
	if err != nil {
		return fmt.Errorf("log of the pod that succeeded: %w", err)
	}
	r := framework.ParseReport(logs)
	if r.Env["NCCL_IB_HCA"] != "=mlx5_0:1" || r.Devices["uverbs0"] != "c 231,192" {
		return fmt.Errorf("%w: NCCL_IB_HCA=%q, uverbs0 %q, want =mlx5_0:1 and c 231,192:\n%s", framework.ErrWrongDevices, r.Env["NCCL_IB_HCA"], r.Devices["uverbs0"], logs)
	}
	return nil
}

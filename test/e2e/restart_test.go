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
	ctx := framework.Context(t, 15*time.Minute)
	ds, err := env.Client.AppsV1().DaemonSets(framework.Namespace).Get(ctx, framework.DaemonSet, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	image := ds.Spec.Template.Spec.Containers[0].Image
	repo, tag, _ := strings.Cut(image, ":")
	newTag := tag + "-e2e-update"
	// A second tag of the image, as a new release would bring.
	if _, err := env.Ctr(ctx, "images", "tag", "--force", image, repo+":"+newTag); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares, "image.tag="+tag); err != nil {
			t.Errorf("roll back to %s: %v", tag, err)
		}
	})

	ns := env.NewNamespace(t, "churn")
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_0"), Shares: 1}}, ""))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var results []string
	// Two workers, each running short pods one after the other.
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				name := fmt.Sprintf("churn-%d-%d", w, i)
				res := runToCompletion(ctx, ns, name)
				mu.Lock()
				results = append(results, name+": "+res)
				mu.Unlock()
			}
		}(w)
	}

	time.Sleep(10 * time.Second)
	t.Log("restarting the kubelet")
	if out, err := env.ClusterTool(ctx, "restart", "kubelet"); err != nil {
		t.Errorf("restart kubelet: %v\n%s", err, out)
	}
	if _, err := env.Kubectl(ctx, "wait", "--for=condition=Ready", "node/"+env.Node, "--timeout=2m"); err != nil {
		t.Error(err)
	}
	time.Sleep(10 * time.Second)
	t.Logf("rolling update of the plugin to %s", newTag)
	if err := env.Install(ctx, shares, "image.tag="+newTag); err != nil {
		t.Errorf("rolling update: %v", err)
	}
	pod, err := env.PluginPod(ctx)
	if err != nil || pod.Spec.Containers[0].Image != repo+":"+newTag {
		t.Errorf("plugin after the update: %v %v", pod, err)
	}
	time.Sleep(10 * time.Second)
	close(stop)
	wg.Wait()

	ok := 0
	for _, r := range results {
		if strings.HasSuffix(r, ": ok") {
			ok++
		} else {
			t.Errorf("pod did not complete: %s", r)
		}
	}
	t.Logf("%d pods ran to completion while the kubelet restarted and the plugin was updated", ok)
	if ok < 4 {
		t.Errorf("only %d pods completed; the churn did not overlap the restarts", ok)
	}
	evs, err := env.WarningEvents(ctx, ns, "FailedPrepare")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range evs {
		t.Errorf("failed prepare: %s", e)
	}
}

// runToCompletion runs a pod that reports and exits, waits until it finishes, checks what it
// saw and deletes it. It returns "ok" or what went wrong.
func runToCompletion(ctx context.Context, ns, name string) string {
	pod := framework.ReportPod(ns, name, "share")
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Containers[0].Command = []string{"sh", "-c", strings.Replace(framework.ReportScript, "exec sleep 86400", "exit 0", 1)}
	pods := env.Client.CoreV1().Pods(ns)
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return "create: " + err.Error()
	}
	defer func() { _ = pods.Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{}) }()
	var phase corev1.PodPhase
	err := framework.Poll(ctx, 4*time.Minute, time.Second, func(ctx context.Context) error {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		phase = p.Status.Phase
		if phase == corev1.PodSucceeded || phase == corev1.PodFailed {
			return nil
		}
		return fmt.Errorf("phase %s", phase)
	})
	if err != nil {
		return err.Error()
	}
	if phase != corev1.PodSucceeded {
		return "phase " + string(phase)
	}
	logs, err := pods.GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
	if err != nil {
		return "logs: " + err.Error()
	}
	r := framework.ParseReport(string(logs))
	if r.Env["NCCL_IB_HCA"] != "=mlx5_0:1" || r.Devices["uverbs0"] != "c 231,192" {
		return "container saw: " + string(logs)
	}
	return "ok"
}

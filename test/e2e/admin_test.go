package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestAdminAccessMonitor runs the port monitor of demo/port-monitor (its DaemonSet and
// claim template, in a namespace of the test labelled for admin access) next to a pod that
// holds mlx5_8 whole: both run, the monitor's claim has every exclusive device of the node
// with admin access, mlx5_8's among them, and the monitor reads mlx5_8's state from the
// mock sysfs, which the DaemonSet gets mounted here as its README says.
//
// The node is configured with modes: exclusive for the test: Kubernetes 1.37.1 still
// checks a device's counters for an admin-access request (kubernetes#140729), and in the
// default model a port held whole has none left. mlx5_8 is a RoCE port, which the local
// cluster's legacy resource (InfiniBand ports) does not take, so its exclusive device
// consumes no counter at all.
func TestAdminAccessMonitor(t *testing.T) {
	env.NeedMockNode(t)
	env.NeedHost(t, "mount the mock sysfs into the monitor")
	const port = "mlx5_8"
	ctx := framework.Context(t, 15*time.Minute)
	if err := installExclusiveOnly(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Install(context.Background(), shares); err != nil {
			t.Errorf("reinstall with both modes: %v", err)
		}
	})
	ns := env.NewNamespace(t, "monitor")
	labelAdminAccess(t, ctx, ns)

	env.CreateClaimTemplate(t, ns, "holder", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classExclusive, CEL: framework.OnPort(port)}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "holder", "holder"))
	assertSees(t, "holder", env.WaitReport(t, ns, "holder"), want{ibdevs: []string{port}, gidIndex: "3"})

	template, ds := monitorDemo(t)
	template.Namespace, ds.Namespace = ns, ns
	mountMockSys(ds, env.MockSysRoot())
	if _, err := env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the monitor's claim template: %v", err)
	}
	if _, err := env.Client.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the monitor DaemonSet: %v", err)
	}
	monitor := monitorPod(t, ctx, ns, ds.Spec.Selector.MatchLabels)
	if _, err := env.WaitPod(ctx, ns, monitor, 3*time.Minute, framework.Running); err != nil {
		env.FailPod(t, ns, monitor, fmt.Errorf("monitor did not run next to the holder: %w", err))
	}
	want := port + `/1 state="4: ACTIVE"`
	logs, err := env.WaitLogs(ctx, ns, monitor, 2*time.Minute, false, func(logs string) error {
		if !strings.Contains(logs, "--- round") {
			return errors.New("no round printed yet")
		}
		if !strings.Contains(logs, want) {
			return fmt.Errorf("no line %q", want)
		}
		return nil
	})
	if err != nil {
		env.FailPod(t, ns, monitor, fmt.Errorf("monitor's report: %w", err))
	}
	t.Logf("monitor %s:\n%s", monitor, logs)

	claim := env.PodClaim(t, ns, monitor)
	admin, total := 0, 0
	sawPort := false
	for _, r := range claim.Status.Allocation.Devices.Results {
		total++
		if ptr.Deref(r.AdminAccess, false) {
			admin++
		}
		sawPort = sawPort || r.Device == "mlx5-8-p1"
	}
	if admin != total || !sawPort {
		t.Errorf("monitor's claim %s: %d of %d results with admin access, mlx5-8-p1 among them %v: %v", claim.Name, admin, total, sawPort, framework.AllocatedDevices(claim))
	}
	// The holder still has its port, with its own claim, and runs on.
	holder := env.PodClaim(t, ns, "holder")
	if got := framework.AllocatedDevices(holder); len(got) != 1 || got[0] != "hca=mlx5-8-p1" {
		t.Errorf("holder's claim %s: %v, want hca=mlx5-8-p1", holder.Name, got)
	}
	if p, err := env.WaitPod(ctx, ns, "holder", time.Minute, framework.Running); err != nil {
		env.FailPod(t, ns, "holder", fmt.Errorf("holder after the monitor started: %w", err))
	} else if restarts := restartCount(p); restarts > 0 {
		t.Errorf("holder restarted %d times while the monitor came up", restarts)
	}
}

// labelAdminAccess gives the namespace the label the API requires for admin access.
func labelAdminAccess(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, resourceapi.DRAAdminNamespaceLabelKey)
	if _, err := env.Client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatalf("label namespace %s for admin access: %v", ns, err)
	}
}

// monitorDemo reads the claim template and the DaemonSet of demo/port-monitor.
func monitorDemo(t *testing.T) (*resourceapi.ResourceClaimTemplate, *appsv1.DaemonSet) {
	t.Helper()
	file := filepath.Join(env.Repo, "demo", "port-monitor", "port-monitor.yaml")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var template *resourceapi.ResourceClaimTemplate
	var ds *appsv1.DaemonSet
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		switch tm.Kind {
		case "ResourceClaimTemplate":
			template = &resourceapi.ResourceClaimTemplate{}
			err = yaml.UnmarshalStrict(doc, template)
		case "DaemonSet":
			ds = &appsv1.DaemonSet{}
			err = yaml.UnmarshalStrict(doc, ds)
		}
		if err != nil {
			t.Fatalf("%s: %s: %v", file, tm.Kind, err)
		}
	}
	if template == nil || ds == nil {
		t.Fatalf("%s: want a ResourceClaimTemplate and a DaemonSet", file)
	}
	return template, ds
}

// mountMockSys mounts the mock sysfs tree into the monitor and points it there, as the
// demo's README shows for mock nodes.
func mountMockSys(ds *appsv1.DaemonSet, sysRoot string) {
	spec := &ds.Spec.Template.Spec
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "mock-sys", VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: sysRoot, Type: ptr.To(corev1.HostPathDirectory)},
	}})
	c := &spec.Containers[0]
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "mock-sys", MountPath: "/host/sys", ReadOnly: true})
	for i := range c.Env {
		if c.Env[i].Name == "SYSFS_ROOT" {
			c.Env[i].Value = "/host/sys"
		}
	}
	// The suite's pods end quickly when deleted.
	spec.TerminationGracePeriodSeconds = ptr.To[int64](1)
}

// monitorPod waits for the DaemonSet's pod on the node and returns its name.
func monitorPod(t *testing.T, ctx context.Context, ns string, selector map[string]string) string {
	t.Helper()
	var name string
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "the monitor's pod", func(ctx context.Context) error {
		pods, err := env.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: selector})})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods of the DaemonSet, want 1 on the single node", len(pods.Items))
		}
		name = pods.Items[0].Name
		return nil
	})
	return name
}

func restartCount(p *corev1.Pod) int32 {
	var n int32
	for _, cs := range p.Status.ContainerStatuses {
		n += cs.RestartCount
	}
	return n
}

// installExclusiveOnly upgrades the release with modes: exclusive and waits until the node
// publishes its ports whole only.
func installExclusiveOnly(ctx context.Context) error {
	if err := env.Upgrade(ctx, "nodeConfig.modes=exclusive"); err != nil {
		return err
	}
	if err := env.WaitRollout(ctx); err != nil {
		return err
	}
	return framework.Poll(ctx, 2*time.Minute, time.Second, func(ctx context.Context) error {
		if _, err := env.SliceDevice(ctx, "mlx5-8-p1"); err != nil {
			return err
		}
		if _, err := env.SliceDevice(ctx, "mlx5-8-p1-shared"); err == nil {
			return errors.New("mlx5-8-p1-shared still published with modes: exclusive")
		}
		return nil
	})
}

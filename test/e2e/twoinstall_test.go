package e2e

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/pkg/cdi"
	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// A second installation of the driver under another name, on the same node
// (docs/security.md, "Installations do not touch each other's files").
const (
	secondDriver    = "second.rdma.example.com"
	secondRelease   = "rdma-dra-second"
	secondNamespace = "rdma-dra-second"
	secondClass     = "e2e-second-driver"
)

// TestTwoInstallationsShareANode installs a second release of the chart with another
// driver name next to the suite's (plugin only: the controller and the RdmaPool CRD are
// cluster-wide and stay with the first). One claim with a device of each driver keeps
// both CDI specs and the pod sees both ports; uninstalling the second release removes its
// hook, data directory and slices and leaves the first installation's spec of a running
// claim, its hook and its checkpoint alone.
func TestTwoInstallationsShareANode(t *testing.T) {
	env.NeedMockNode(t)
	host := env.NeedHost(t, "look at both installations' CDI specs, hooks and data directories on the node")
	ctx := framework.Context(t, 10*time.Minute)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		_, _ = env.Helm(ctx, "uninstall", secondRelease, "--namespace", secondNamespace, "--ignore-not-found", "--wait", "--timeout", "2m")
		_ = env.Client.ResourceV1().DeviceClasses().Delete(ctx, secondClass, metav1.DeleteOptions{})
		_ = env.Client.CoreV1().Namespaces().Delete(ctx, secondNamespace, metav1.DeleteOptions{})
	})
	// Its own liveness port (both plugins use the host network) and no metrics, network
	// attachment or controller.
	args := append([]string{"upgrade", "--install", secondRelease, env.ChartDir(), "--namespace", secondNamespace, "--create-namespace"}, env.ValuesArgs()...)
	args = append(args, "--set", "driverName="+secondDriver, "--set", "controller.enabled=false", "--set", "pools.shared.enabled=false",
		"--set", "pools.exclusive.enabled=false", "--set", "pools.legacy.enabled=false", "--set", "networkAttachment.enabled=false", "--set", "metrics.enabled=false",
		"--set", "healthcheck.port=51516", "--wait", "--timeout", "3m")
	if _, err := env.Helm(ctx, args...); err != nil {
		// What the second plugin said, for the diagnosis.
		for _, args := range [][]string{
			{"-n", secondNamespace, "get", "pods", "-o", "wide"},
			{"-n", secondNamespace, "logs", "daemonset/" + secondRelease + "-rdma-dra-driver-kubelet-plugin", "--tail=30"},
			{"-n", secondNamespace, "logs", "daemonset/" + secondRelease + "-rdma-dra-driver-kubelet-plugin", "--previous", "--tail=30"},
		} {
			out, kerr := env.Kubectl(ctx, args...)
			t.Logf("kubectl %v: %v\n%s", args, kerr, out)
		}
		t.Fatal(err)
	}
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "the second driver's ResourceSlices", func(ctx context.Context) error {
		slices, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + secondDriver})
		if err != nil {
			return err
		}
		for _, s := range slices.Items {
			if len(s.Spec.Devices) > 0 {
				return nil
			}
		}
		return fmt.Errorf("%d slices, none with devices", len(slices.Items))
	})
	if _, err := env.Client.ResourceV1().DeviceClasses().Create(ctx, &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: secondClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.driver == %q && device.attributes[%q].mode == \"exclusive\"", secondDriver, "rdma.dra.io")}}}},
	}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}

	ns := env.NewNamespace(t, "two-drivers")
	// Different ports: the two installations do not know each other's allocations.
	env.CreateClaimTemplate(t, ns, "both", framework.ClaimSpec([]framework.Request{
		{Name: "first", Class: classShared, CEL: framework.OnPort(rocePortA)},
		{Name: "second", Class: secondClass, CEL: framework.OnPort(ibPort)},
	}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "both", "both"))
	rep := env.WaitReport(t, ns, "both")
	for _, ibdev := range []string{rocePortA, ibPort} {
		name, num := uverbs(ibdev)
		if got := rep.Devices[name]; got != num {
			t.Errorf("%s: the pod sees /dev/infiniband/%s = %q, want %q (%s)\n%s", framework.DriverFault, name, got, num, ibdev, rep.Raw)
		}
	}
	both := env.PodClaim(t, ns, "both")
	specs := []string{
		filepath.Join(env.CDIDir(), cdi.SpecFileName(framework.DriverName, string(both.UID))),
		filepath.Join(env.CDIDir(), cdi.SpecFileName(secondDriver, string(both.UID))),
	}
	for _, s := range specs {
		if _, err := host.Lstat(s); err != nil {
			t.Errorf("%s: a claim with devices of both drivers lost a spec: %v", framework.DriverFault, err)
		}
	}

	// A running claim of the first driver, then the second release goes.
	env.CreateClaimTemplate(t, ns, "first-only", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort(rocePortA)}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "first", "first-only"))
	env.WaitReport(t, ns, "first")
	first := env.PodClaim(t, ns, "first")
	env.DeletePod(t, ns, "both")
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "the specs of the deleted pod's claim removed by both plugins", func(context.Context) error {
		for _, s := range specs {
			if _, err := host.Lstat(s); !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("%s: %v", s, err)
			}
		}
		return nil
	})
	secondHook := filepath.Join(env.HookInstallDir(), cdi.HookFileName(secondDriver))
	if _, err := host.Lstat(secondHook); err != nil {
		t.Fatalf("the second plugin installed no hook of its own: %v", err)
	}
	if _, err := env.Helm(ctx, "uninstall", secondRelease, "--namespace", secondNamespace, "--wait", "--timeout", "2m"); err != nil {
		t.Fatal(err)
	}
	secondData := filepath.Join(env.KubeletDir(), "plugins", secondDriver)
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "the second installation's files and slices gone", func(ctx context.Context) error {
		if _, err := host.Lstat(secondHook); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hook %s: %v", secondHook, err)
		}
		if entries, err := host.ReadDir(secondData); err == nil && len(entries) > 0 {
			return fmt.Errorf("%d files left in %s", len(entries), secondData)
		}
		slices, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + secondDriver})
		if err != nil {
			return err
		}
		if len(slices.Items) > 0 {
			return fmt.Errorf("%d slices of %s left", len(slices.Items), secondDriver)
		}
		return nil
	})
	// The first installation did not notice.
	if _, err := host.Lstat(env.CDISpecFor(string(first.UID))); err != nil {
		t.Errorf("%s: uninstalling the second installation removed the first's spec of a running claim: %v", framework.DriverFault, err)
	}
	if _, err := host.Lstat(filepath.Join(env.HookInstallDir(), cdi.HookFileName(framework.DriverName))); err != nil {
		t.Errorf("%s: uninstalling the second installation removed the first's hook: %v", framework.DriverFault, err)
	}
	cp, err := env.Checkpoint()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cp[string(first.UID)]; !ok {
		t.Errorf("%s: the first plugin's checkpoint lost the running claim %s", framework.DriverFault, first.Name)
	}
}

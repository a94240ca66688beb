package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestUninstallLeavesNothing uninstalls the chart after a claim was prepared and released:
// no CDI spec, checkpoint, data-directory file, hook file or ResourceSlice of the driver may
// stay on the node. The driver is installed again at the end.
func TestUninstallLeavesNothing(t *testing.T) {
	host := env.NeedHost(t, "look for the driver's files on the node")
	ctx := framework.Context(t, 10*time.Minute)
	ns := env.NewNamespace(t, "uninstall")
	env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, Shares: 1}}, ""))
	env.CreatePod(t, framework.ReportPod(ns, "before", "share"))
	env.WaitReport(t, ns, "before")
	env.DeletePod(t, ns, "before")
	hook := filepath.Join(env.HookInstallDir(), "rdma-dra-cdi-hook")
	if _, err := host.Lstat(hook); err != nil {
		t.Fatalf("the installed plugin has no hook file to clean up: %v", err)
	}

	uninstallSuite(t, ctx, host, hook, false)
	t.Log("uninstalled without leftovers")
}

// uninstallSuite uninstalls the suite's release (and with namespace also deletes its
// namespace), puts the release back when the test ends, and waits until nothing of the
// driver is left on the node (driverLeftovers).
func uninstallSuite(t *testing.T, ctx context.Context, host framework.Host, hook string, namespace bool) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if err := env.Install(ctx, shares); err != nil {
			t.Errorf("reinstall: %v", err)
		}
	})
	if _, err := env.Helm(ctx, "uninstall", framework.Release, "--namespace", framework.Namespace, "--wait", "--timeout", "2m"); err != nil {
		t.Fatal(err)
	}
	if namespace {
		if _, err := env.Kubectl(ctx, "delete", "namespace", framework.Namespace, "--ignore-not-found", "--timeout=3m"); err != nil {
			t.Fatal(err)
		}
	}
	framework.Eventually(t, ctx, 2*time.Minute, time.Second, "nothing of the driver left on the node", func(ctx context.Context) error {
		return driverLeftovers(ctx, host, hook)
	})
}

// driverLeftovers names what of an uninstalled driver is still on the node or in the API:
// plugin pods, CDI specs, files in its data and device metadata directories, the hook
// file, ResourceSlices.
func driverLeftovers(ctx context.Context, host framework.Host, hook string) error {
	pods, err := env.Client.CoreV1().Pods(framework.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=kubelet-plugin"})
	if err != nil {
		return err
	}
	if len(pods.Items) > 0 {
		return fmt.Errorf("%d plugin pods left", len(pods.Items))
	}
	if specs, _ := env.CDISpecs(); len(specs) > 0 {
		return fmt.Errorf("CDI specs left: %v", specs)
	}
	if entries, err := host.ReadDir(env.PluginDataDir()); err == nil && len(entries) > 0 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		return fmt.Errorf("files left in %s: %v", env.PluginDataDir(), names)
	}
	if entries, err := host.ReadDir(env.DeviceMetadataDir()); err == nil && len(entries) > 0 {
		return fmt.Errorf("device metadata left in %s: %d claims", env.DeviceMetadataDir(), len(entries))
	}
	if _, err := host.Lstat(hook); err == nil {
		return fmt.Errorf("hook left: %s", hook)
	}
	slices, err := env.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: "spec.driver=" + framework.DriverName})
	if err != nil {
		return err
	}
	if len(slices.Items) > 0 {
		return fmt.Errorf("%d ResourceSlices of the driver left", len(slices.Items))
	}
	return nil
}

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestReadmeInstall runs the README's install and uninstall commands, as a user copies
// them, on the local cluster: first with Helm, then with the static manifests. The only
// changes (framework.Localize) are the repository's chart in place of the published one
// (the tree under test), the local cluster's values appended to helm install (its kubelet
// directory, mock mode, the local image) and the static manifests rendered from the same
// chart with the same values. Each way must publish the node's devices,
// create the default pools' DeviceClasses, run a pod on a claim, and uninstall without
// leaving anything on the node, the namespace included. The suite's installation is
// removed first (the README creates the namespace) and put back at the end.
func TestReadmeInstall(t *testing.T) {
	host := env.NeedHost(t, "check that the README's uninstall leaves nothing of the driver on the node")
	ctx := framework.Context(t, 20*time.Minute)
	readme, err := os.ReadFile(filepath.Join(env.Repo, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := map[string][]string{}
	for _, name := range []string{"install-helm", "uninstall-helm", "install-static", "uninstall-static"} {
		if blocks[name], err = framework.ReadmeBlock(readme, name); err != nil {
			t.Fatal(err)
		}
	}
	static := env.RenderStatic(t, ctx)
	values := append(slices.Clone(env.Values), env.E2EValuesFile())
	hook := filepath.Join(env.HookInstallDir(), "rdma-dra-cdi-hook")

	// The suite's installation goes, with its namespace: the README creates it.
	uninstallSuite(t, ctx, host, hook, true)

	for _, way := range []string{"helm", "static"} {
		t.Run(way, func(t *testing.T) {
			localize := func(cmds []string) []string {
				var out []string
				for _, c := range cmds {
					out = append(out, framework.Localize(c, values, static))
				}
				return out
			}
			env.RunReadme(t, ctx, localize(blocks["install-"+way]))
			if err := env.WaitReady(ctx, shares); err != nil {
				t.Fatalf("after the README's install: %v", err)
			}
			ns, err := env.Client.CoreV1().Namespaces().Get(ctx, framework.Namespace, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "privileged" {
				t.Errorf("namespace %s: pod-security.kubernetes.io/enforce = %q, want privileged", framework.Namespace, got)
			}
			framework.Eventually(t, ctx, time.Minute, time.Second, "the default pools' DeviceClasses", func(ctx context.Context) error {
				for _, class := range []string{classShared, classExclusive} {
					if _, err := env.Client.ResourceV1().DeviceClasses().Get(ctx, class, metav1.GetOptions{}); err != nil {
						return fmt.Errorf("DeviceClass %s: %w", class, err)
					}
				}
				return nil
			})
			podNS := env.NewNamespace(t, "readme-"+way)
			env.CreateClaimTemplate(t, podNS, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, Shares: 1}}, ""))
			env.CreatePod(t, framework.ReportPod(podNS, "pod", "share"))
			if r := env.WaitReport(t, podNS, "pod"); len(r.Devices) == 0 || r.Env["NCCL_IB_HCA"] == "" {
				t.Errorf("the pod sees no RDMA device (devices %v, NCCL_IB_HCA %q):\n%s", r.Devices, r.Env["NCCL_IB_HCA"], r.Raw)
			}
			env.DeletePod(t, podNS, "pod")

			env.RunReadme(t, ctx, localize(blocks["uninstall-"+way]))
			framework.Eventually(t, ctx, 2*time.Minute, time.Second, "nothing of the driver left after the README's uninstall", func(ctx context.Context) error {
				if err := driverLeftovers(ctx, host, hook); err != nil {
					return err
				}
				if _, err := env.Client.CoreV1().Namespaces().Get(ctx, framework.Namespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("namespace %s still there (%v)", framework.Namespace, err)
				}
				return nil
			})
		})
		if t.Failed() {
			return
		}
	}
}

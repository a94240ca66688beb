package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// badConfig is an RdmaConfig the driver refuses: charDevices has no value "all".
const badConfig = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","charDevices":"all"}`

// badClaimYAML is a ResourceClaim with badConfig as a user writes it.
const badClaimYAML = `apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: bad
spec:
  devices:
    requests:
    - name: hca
      exactly:
        deviceClassName: rdma-shared
    config:
    - opaque:
        driver: rdma.dra.io
        parameters:
          apiVersion: rdma.dra.io/v1alpha1
          kind: RdmaConfig
          charDevices: all
`

// badConfigMessage is the field path and reason both the webhook and the plugin report.
const badConfigMessage = `charDevices: Unsupported value: "all"`

// TestBadClaimConfig: with the webhook on, a bad config is refused when it is written; with
// the webhook off, the plugin refuses it at prepare, the pod's events say why, and nothing
// is left on the node.
func TestBadClaimConfig(t *testing.T) {
	spec := framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_6")}}, "", framework.OpaqueConfig(badConfig))
	ctx := framework.Context(t, 10*time.Minute)

	t.Run("webhook refuses it at apply", func(t *testing.T) {
		whs, err := env.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + framework.Release})
		if err != nil {
			t.Fatal(err)
		}
		if len(whs.Items) == 0 {
			t.Fatal("no ValidatingWebhookConfiguration of the release; the chart enables the webhook by default")
		}
		ns := env.NewNamespace(t, "badcfg-webhook")
		// The controller may still be starting after an install: retry until it answers.
		err = framework.Poll(ctx, 2*time.Minute, 2*time.Second, func(ctx context.Context) error {
			_, err := env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
				ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec},
			}, metav1.CreateOptions{})
			if err == nil {
				_ = env.Client.ResourceV1().ResourceClaimTemplates(ns).Delete(ctx, "bad", metav1.DeleteOptions{})
				return errors.New("admitted")
			}
			return nil
		})
		if err != nil {
			t.Fatalf("the webhook admitted a bad config: %v", err)
		}
		_, err = env.Client.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, &resourceapi.ResourceClaimTemplate{
			ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: resourceapi.ResourceClaimTemplateSpec{Spec: spec},
		}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), badConfigMessage) {
			t.Fatalf("create: %v; want a refusal naming %q", err, badConfigMessage)
		}
		t.Logf("refused: %v", err)

		// The same config in a ResourceClaim, as a user applies it: refused with the
		// whole field path.
		claim := filepath.Join(t.TempDir(), "claim.yaml")
		if err := os.WriteFile(claim, []byte(badClaimYAML), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := env.Kubectl(ctx, "apply", "--dry-run=server", "-n", ns, "-f", claim)
		if want := "spec.devices.config[0].opaque.parameters." + badConfigMessage; err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("kubectl apply: %v %s; want a refusal naming %q", err, out, want)
		}
	})

	t.Run("plugin refuses it at prepare", func(t *testing.T) {
		env.NeedMockNode(t)
		host := env.NeedHost(t, "read the plugin's checkpoint and CDI specs")
		if err := env.Install(ctx, shares, "webhook.enabled=false"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.Install(context.Background(), shares); err != nil {
				t.Errorf("reinstall with the webhook: %v", err)
			}
		})
		ns := env.NewNamespace(t, "badcfg-plugin")
		env.CreateClaimTemplate(t, ns, "bad", spec)
		env.CreatePod(t, framework.ReportPod(ns, "bad", "bad"))
		var events []string
		framework.Eventually(t, ctx, 2*time.Minute, time.Second, "prepare error event", func(ctx context.Context) error {
			var err error
			events, err = env.WarningEvents(ctx, ns, "FailedPrepareDynamicResources")
			if err != nil {
				return err
			}
			for _, e := range events {
				if strings.Contains(e, badConfigMessage) {
					return nil
				}
			}
			return errors.New("no event yet")
		})
		t.Logf("event: %s", events[0])
		pod, err := env.Client.CoreV1().Pods(ns).Get(ctx, "bad", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pod.Status.Phase == corev1.PodRunning {
			t.Errorf("pod runs although its claim config is invalid")
		}
		claim := env.PodClaim(t, ns, "bad")
		cp, err := env.Checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		if e, ok := cp[string(claim.UID)]; ok {
			t.Errorf("checkpoint has an entry for the refused claim: %+v", e)
		}
		if _, err := host.Lstat(env.CDISpecFor(string(claim.UID))); err == nil {
			t.Errorf("CDI spec written for the refused claim")
		}
	})
}

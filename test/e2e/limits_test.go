package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// managementConfig asks for umad and issm, which the chart's rdma-shared pool does not
// allow (allowedCharDevices: verbs).
const managementConfig = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","charDevices":"management"}`

// limitMessage is what the webhook and the plugin both say about managementConfig.
const limitMessage = `charDevices: Forbidden: "management" exceeds the DeviceClass's allowedCharDevices "verbs"`

// TestClaimCannotExceedClassLimits (issue 11, item 3): a share of a port gets verbs only
// by default; a claim that asks for management devices on the verbs-only shared class is
// refused by the webhook when it is written and, with the webhook off, by the plugin at
// prepare, so the pod never starts with umad or issm of a shared port.
func TestClaimCannotExceedClassLimits(t *testing.T) {
	ctx := framework.Context(t, 10*time.Minute)
	spec := framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_5")}}, "", framework.OpaqueConfig(managementConfig))

	t.Run("a share is verbs only by default", func(t *testing.T) {
		env.NeedMockNode(t)
		ns := env.NewNamespace(t, "limits-default")
		env.CreateClaimTemplate(t, ns, "share", framework.ClaimSpec([]framework.Request{{Name: "hca", Class: classShared, CEL: framework.OnPort("mlx5_5")}}, ""))
		env.CreatePod(t, framework.ReportPod(ns, "share", "share"))
		r := env.WaitReport(t, ns, "share")
		for name := range r.Devices {
			if strings.HasPrefix(name, "umad") || strings.HasPrefix(name, "issm") {
				t.Errorf("%s: a share of mlx5_5 sees /dev/infiniband/%s\n%s", framework.DriverFault, name, r.Raw)
			}
		}
		if _, ok := r.Devices["rdma_cm"]; !ok {
			t.Errorf("%s: no rdma_cm\n%s", framework.DriverFault, r.Raw)
		}
	})

	t.Run("webhook refuses management on the shared class", func(t *testing.T) {
		ns := env.NewNamespace(t, "limits-webhook")
		if err := env.ExpectTemplateRefused(ctx, 2*time.Minute, ns, "mgmt", spec, "spec.spec.devices.config[0].opaque.parameters."+limitMessage); err != nil {
			t.Fatalf("create: %v; want a refusal naming %q", err, limitMessage)
		}
	})

	t.Run("plugin refuses it at prepare", func(t *testing.T) {
		env.NeedMockNode(t)
		if err := env.Install(ctx, shares, "webhook.enabled=false"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.Install(context.Background(), shares); err != nil {
				t.Errorf("reinstall with the webhook: %v", err)
			}
		})
		ns := env.NewNamespace(t, "limits-plugin")
		env.CreateClaimTemplate(t, ns, "mgmt", spec)
		env.CreatePod(t, framework.ReportPod(ns, "mgmt", "mgmt"))
		framework.Eventually(t, ctx, 2*time.Minute, time.Second, "prepare error event", func(ctx context.Context) error {
			events, err := env.WarningEvents(ctx, ns, "FailedPrepareDynamicResources")
			if err != nil {
				return err
			}
			for _, e := range events {
				if strings.Contains(e, limitMessage) {
					return nil
				}
			}
			return errors.New("no event yet")
		})
	})
}

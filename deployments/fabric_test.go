package deployments

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestHelmFabricReadiness: gating ports on fabric readiness (nodeConfig.fabricReadiness)
// grants the plugin watch on resourceclaims, and nothing else more; the node config
// reaches the plugin; without rbac.claimDeviceStatus, which the binding conditions are
// written with, the chart refuses to render.
func TestHelmFabricReadiness(t *testing.T) {
	helm := helmBinary(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("nodeConfig:\n  fabricReadiness:\n    enabled: true\n    include: [{linkTypes: [InfiniBand]}]\n    timeoutSeconds: 120\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	claimVerbs := func(args ...string) []string {
		t.Helper()
		out, err := runHelm(t, helm, append([]string{"template", chartDir}, args...)...)
		if err != nil {
			t.Fatalf("helm template: %v", err)
		}
		objs, err := decodeManifests("helm template", []byte(out))
		if err != nil {
			t.Fatal(err)
		}
		var verbs []string
		for _, role := range only[*rbacv1.ClusterRole](objs) {
			if !strings.HasSuffix(role.Name, "-kubelet-plugin") {
				continue
			}
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "resourceclaims") {
					verbs = append(verbs, r.Verbs...)
				}
			}
		}
		if len(args) > 0 {
			found := false
			for _, cm := range only[*corev1.ConfigMap](objs) {
				found = found || strings.Contains(cm.Data["node-config.yaml"], "fabricReadiness")
			}
			if !found {
				t.Errorf("no ConfigMap passes fabricReadiness to the plugin")
			}
			policy, _ := policyNamed(t, objs, "-claim-status")
			if !slices.ContainsFunc(policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool {
				return strings.Contains(v.Expression, "rdma.dra.io/FabricReady")
			}) {
				t.Errorf("the claim status policy does not limit the conditions the plugin writes")
			}
		}
		slices.Sort(verbs)
		return verbs
	}
	if got, want := claimVerbs(), []string{"get", "list"}; !slices.Equal(got, want) {
		t.Errorf("default: resourceclaims verbs %v, want %v", got, want)
	}
	if got, want := claimVerbs("-f", values), []string{"get", "list", "watch"}; !slices.Equal(got, want) {
		t.Errorf("fabric readiness: resourceclaims verbs %v, want %v", got, want)
	}
	_, err := runHelm(t, helm, "template", chartDir, "-f", values, "--set", "rbac.claimDeviceStatus=false")
	if err == nil || !strings.Contains(err.Error(), "nodeConfig.fabricReadiness.enabled needs rbac.claimDeviceStatus") {
		t.Errorf("without rbac.claimDeviceStatus: %v, want the chart to refuse", err)
	}
}

package deployments

import (
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestSecureMetricsIsOptIn: with the default values nothing of secure /metrics is
// granted or set (metrics.secure, controller.metricsSecure): no binding to
// system:auth-delegator, no metrics reader role, no METRICS_SECURE.
func TestSecureMetricsIsOptIn(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			for _, b := range only[*rbacv1.ClusterRoleBinding](objs) {
				if b.RoleRef.Name == "system:auth-delegator" {
					t.Errorf("ClusterRoleBinding %s grants system:auth-delegator by default", b.Name)
				}
			}
			for _, r := range only[*rbacv1.ClusterRole](objs) {
				if strings.HasSuffix(r.Name, "-metrics-reader") {
					t.Errorf("ClusterRole %s exists by default", r.Name)
				}
				for _, rule := range r.Rules {
					if len(rule.NonResourceURLs) > 0 {
						t.Errorf("ClusterRole %s grants non-resource URLs %v by default", r.Name, rule.NonResourceURLs)
					}
				}
			}
			for _, d := range only[*appsv1.Deployment](objs) {
				for _, c := range d.Spec.Template.Spec.Containers {
					if v := envValue(c, "METRICS_SECURE"); v != "" {
						t.Errorf("Deployment %s sets METRICS_SECURE=%s by default", d.Name, v)
					}
				}
			}
			for _, ds := range only[*appsv1.DaemonSet](objs) {
				for _, c := range ds.Spec.Template.Spec.Containers {
					if v := envValue(c, "METRICS_SECURE"); v != "" {
						t.Errorf("DaemonSet %s sets METRICS_SECURE=%s by default", ds.Name, v)
					}
				}
			}
		})
	}
}

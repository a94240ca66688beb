package deployments

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/pkg/controller"
	"github.com/rdma-dra/rdma-dra-driver/pkg/webhook"
)

func controllerDeployment(t *testing.T, objs []object) (*appsv1.Deployment, corev1.Container) {
	t.Helper()
	d := one[*appsv1.Deployment](t, objs)
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment %s has %d containers", d.Name, len(d.Spec.Template.Spec.Containers))
	}
	return d, d.Spec.Template.Spec.Containers[0]
}

func TestControllerDeployment(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			d, c := controllerDeployment(t, decodeFile(t, file))
			if ptr.Deref(d.Spec.Replicas, 0) != 1 || envValue(c, "LEADER_ELECT") != "true" {
				t.Errorf("replicas %v, LEADER_ELECT %q: want one leader-elected replica", d.Spec.Replicas, envValue(c, "LEADER_ELECT"))
			}
			if !slices.Equal(c.Command, []string{"/usr/bin/rdma-dra-controller"}) {
				t.Errorf("command %v", c.Command)
			}
			sc := c.SecurityContext
			if sc == nil || !ptr.Deref(sc.RunAsNonRoot, false) || ptr.Deref(sc.RunAsUser, 0) == 0 || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) ||
				ptr.Deref(sc.AllowPrivilegeEscalation, true) || sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
				len(sc.Capabilities.Add) > 0 || ptr.Deref(sc.Privileged, false) {
				t.Errorf("securityContext %+v: want non-root, read-only, no privilege escalation, all capabilities dropped", sc)
			}
			if spec := d.Spec.Template.Spec; spec.HostNetwork || len(spec.Volumes) > 0 {
				t.Errorf("the controller needs no host network and no volumes by default")
			}
			for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
				if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.StrVal != "probes" {
					t.Errorf("probe %+v, want GET %s on port probes", probe, path)
				}
			}
			// Metrics have no authentication: inside the pod unless the operator opts in.
			if envValue(c, "METRICS_BIND_ADDRESS") != "127.0.0.1:8080" || envValue(c, "HEALTH_PROBE_BIND_ADDRESS") != ":8081" ||
				envValue(c, "WEBHOOK_ADDRESS") != ":9443" {
				t.Errorf("addresses %q %q %q", envValue(c, "METRICS_BIND_ADDRESS"), envValue(c, "HEALTH_PROBE_BIND_ADDRESS"), envValue(c, "WEBHOOK_ADDRESS"))
			}
			for _, name := range []string{"POD_NAMESPACE", "POD_NAME"} {
				if envFieldPath(c, name) == "" {
					t.Errorf("%s is not from the downward API", name)
				}
			}
		})
	}
}

// controllerChartOmits are the controller's flags (by their environment twin) that the
// chart does not set in its default rendering, and why (see checkChartEnv).
var controllerChartOmits = map[string]string{
	"KUBECONFIG":            "the pod's service account",
	"KUBE_API_QPS":          "the controller's default",
	"KUBE_API_BURST":        "the controller's default",
	"LEASE_DURATION":        "the controller's default",
	"RENEW_DEADLINE":        "the controller's default",
	"RETRY_PERIOD":          "the controller's default",
	"WORKERS":               "the controller's default",
	"WEBHOOK_CERT_DIR":      "only with webhook.certManager.enabled",
	"METRICS_SECURE":        "only with controller.metricsSecure",
	"METRICS_TLS_CERT_FILE": "only with controller.metricsSecure and controller.metricsTLSSecretName",
	"METRICS_TLS_KEY_FILE":  "only with controller.metricsSecure and controller.metricsTLSSecretName",
}

// TestControllerEnv: every variable the chart sets is the first environment twin of a
// flag of the controller (controller.Flags), and every flag is set or left out for a
// reason.
func TestControllerEnv(t *testing.T) {
	_, c := controllerDeployment(t, decodeFile(t, staticFiles[0]))
	checkChartEnv(t, c, binaryFlags(controller.Component, controller.Flags(&controller.Config{})), controllerChartOmits)
}

// TestControllerRBAC checks the controller's roles rule by rule against what its code
// calls: informers list and watch, the status is updated, classes are written, and the
// Lease, the Secret and the webhook configuration are named.
func TestControllerRBAC(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	d, c := controllerDeployment(t, objs)
	sa := d.Spec.Template.Spec.ServiceAccountName
	type rule struct{ key, names string }
	collect := func(rules []rbacv1.PolicyRule) map[rule]sets.Set[string] {
		got := map[rule]sets.Set[string]{}
		for _, r := range rules {
			for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
				if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
					t.Errorf("wildcard in %v", list)
				}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					k := rule{g + "/" + res, strings.Join(r.ResourceNames, ",")}
					if got[k] == nil {
						got[k] = sets.New[string]()
					}
					got[k].Insert(r.Verbs...)
				}
			}
		}
		return got
	}
	var cluster, namespaced map[rule]sets.Set[string]
	for _, r := range only[*rbacv1.ClusterRole](objs) {
		if r.Name == sa {
			cluster = collect(r.Rules)
		}
	}
	for _, r := range only[*rbacv1.Role](objs) {
		if r.Name == sa {
			namespaced = collect(r.Rules)
		}
	}
	wantCluster := map[rule]sets.Set[string]{
		{"rdma.dra.io/rdmapools", ""}:          sets.New("list", "watch"),
		{"rdma.dra.io/rdmapools/status", ""}:   sets.New("update"),
		{"resource.k8s.io/deviceclasses", ""}:  sets.New("list", "watch", "create", "update", "delete"),
		{"resource.k8s.io/resourceslices", ""}: sets.New("list", "watch"),
		{"resource.k8s.io/resourceclaims", ""}: sets.New("list", "watch"),
		{"admissionregistration.k8s.io/validatingwebhookconfigurations", envValue(c, "WEBHOOK_CONFIG")}: sets.New("get", "patch"),
	}
	wantNamespaced := map[rule]sets.Set[string]{
		{"coordination.k8s.io/leases", ""}:                        sets.New("create"),
		{"coordination.k8s.io/leases", envValue(c, "LEASE_NAME")}: sets.New("get", "update"),
		{"/secrets", envValue(c, "WEBHOOK_SECRET")}:               sets.New("get", "update"),
	}
	for _, tt := range []struct {
		name      string
		got, want map[rule]sets.Set[string]
	}{{"ClusterRole", cluster, wantCluster}, {"Role", namespaced, wantNamespaced}} {
		if tt.got == nil {
			t.Errorf("no %s %s", tt.name, sa)
			continue
		}
		for k, verbs := range tt.got {
			if !verbs.Equal(tt.want[k]) {
				t.Errorf("%s: %s (names %q) has verbs %v, want %v", tt.name, k.key, k.names, sets.List(verbs), sets.List(tt.want[k]))
			}
		}
		for k := range tt.want {
			if _, ok := tt.got[k]; !ok {
				t.Errorf("%s: %s (names %q) is missing", tt.name, k.key, k.names)
			}
		}
	}
}

// TestWebhookConfiguration checks that the webhook reaches the controller: Service,
// port, path, the names the controller patches, and the default failure policy.
func TestWebhookConfiguration(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	_, c := controllerDeployment(t, objs)
	cfg := one[*admissionregistrationv1.ValidatingWebhookConfiguration](t, objs)
	if cfg.Name != envValue(c, "WEBHOOK_CONFIG") {
		t.Errorf("configuration %s, controller patches %s", cfg.Name, envValue(c, "WEBHOOK_CONFIG"))
	}
	secret := one[*corev1.Secret](t, objs)
	if secret.Name != envValue(c, "WEBHOOK_SECRET") || len(secret.Data) > 0 {
		t.Errorf("Secret %s with %d keys, controller uses %s and fills it", secret.Name, len(secret.Data), envValue(c, "WEBHOOK_SECRET"))
	}
	var svc *corev1.Service
	for _, s := range only[*corev1.Service](objs) {
		if s.Name == envValue(c, "WEBHOOK_SERVICE") {
			svc = s
		}
	}
	if svc == nil {
		t.Fatalf("no Service %s", envValue(c, "WEBHOOK_SERVICE"))
	}
	resources := sets.New[string]()
	for _, w := range cfg.Webhooks {
		ref := w.ClientConfig.Service
		if ref == nil || ref.Name != svc.Name || ref.Namespace != svc.Namespace || ptr.Deref(ref.Path, "") != webhook.Path || ptr.Deref(ref.Port, 0) != 443 {
			t.Errorf("webhook %s calls %+v", w.Name, ref)
		}
		if ptr.Deref(w.FailurePolicy, "") != admissionregistrationv1.Ignore || ptr.Deref(w.SideEffects, "") != admissionregistrationv1.SideEffectClassNone {
			t.Errorf("webhook %s: failurePolicy %v sideEffects %v", w.Name, w.FailurePolicy, w.SideEffects)
		}
		for _, r := range w.Rules {
			resources.Insert(r.Resources...)
			if !slices.Equal(r.Operations, []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}) {
				t.Errorf("webhook %s operations %v", w.Name, r.Operations)
			}
		}
		if w.Name != "rdmapools.rdma.dra.io" && (len(w.MatchConditions) != 1 || !strings.Contains(w.MatchConditions[0].Expression, `c.opaque.driver == "rdma.dra.io"`)) {
			t.Errorf("webhook %s is not limited to objects with this driver's config: %+v", w.Name, w.MatchConditions)
		}
	}
	if want := sets.New("resourceclaims", "resourceclaimtemplates", "deviceclasses", "rdmapools"); !resources.Equal(want) {
		t.Errorf("webhook resources %v, want %v", sets.List(resources), sets.List(want))
	}
	port := false
	for _, p := range svc.Spec.Ports {
		port = port || (p.Port == 443 && p.TargetPort.StrVal == "webhook")
	}
	if !port {
		t.Errorf("Service %s has no port 443 to the webhook", svc.Name)
	}
}

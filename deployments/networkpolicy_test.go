package deployments

import (
	"path/filepath"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// TestWebhookNetworkPolicy: the static manifests ship a NetworkPolicy that selects the
// controller's pods and lets the webhook port be reached from address blocks only (the
// API server is not a pod), never from every pod or namespace, and the probe port for
// the kubelet; nothing else of the pod is open.
func TestWebhookNetworkPolicy(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			_, c := controllerDeployment(t, objs)
			d, _ := controllerDeployment(t, objs)
			np := one[*networkingv1.NetworkPolicy](t, objs)
			if !isSubset(np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels) || len(np.Spec.PodSelector.MatchLabels) == 0 {
				t.Errorf("policy selects %v, not the controller's pods %v", np.Spec.PodSelector.MatchLabels, d.Spec.Template.Labels)
			}
			if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
				t.Errorf("policy types %v, want Ingress", np.Spec.PolicyTypes)
			}
			webhookPort := envValue(c, "WEBHOOK_ADDRESS")[1:]
			probePort := envValue(c, "HEALTH_PROBE_BIND_ADDRESS")[1:]
			open := map[string]bool{}
			for _, rule := range np.Spec.Ingress {
				for _, p := range rule.Ports {
					port := p.Port.String()
					open[port] = true
					switch port {
					case webhookPort:
						if len(rule.From) == 0 {
							t.Error("the webhook port is open to everyone")
						}
						for _, peer := range rule.From {
							if peer.IPBlock == nil || peer.PodSelector != nil || peer.NamespaceSelector != nil {
								t.Errorf("webhook peer %+v: want address blocks only", peer)
							}
						}
					case probePort:
					default:
						t.Errorf("port %s is open", port)
					}
				}
			}
			if !open[webhookPort] || !open[probePort] {
				t.Errorf("open ports %v, want the webhook's %s and the probes' %s", open, webhookPort, probePort)
			}
		})
	}
}

// TestSharedPoolIsVerbsOnly: the chart's shared pool caps claims at verbs, so that no
// claim of a port shared with other tenants gets umad or issm.
func TestSharedPoolIsVerbsOnly(t *testing.T) {
	for _, p := range only[*v1alpha1.RdmaPool](decodeFile(t, staticFiles[0])) {
		if p.Spec.Mode != v1alpha1.PoolModeShared {
			continue
		}
		if p.Spec.Config == nil {
			t.Errorf("shared pool %s has no config", p.Name)
			continue
		}
		cfg, err := v1alpha1.DecodeConfig(p.Spec.Config.Raw)
		if err != nil || cfg.AllowedCharDevices == nil || *cfg.AllowedCharDevices != v1alpha1.CharDevicesVerbs {
			t.Errorf("shared pool %s: config %s (%v), want allowedCharDevices verbs", p.Name, p.Spec.Config.Raw, err)
		}
	}
}

package deployments

import (
	"encoding/json"
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

// TestDefaultPoolsAreSafe: a default install gives a tenant only what the chart's
// documented defaults name (docs/security.md): every pool caps claims at verbs (no umad
// to the fabric, no issm), attaches no network and allows none, so that a claim asking
// for management devices, a netdev move, a macvlan, a static address or a route on a
// default class is refused at prepare (and by the webhook, which applies the same rule).
// Memlock stays open: locked pages are charged to the pod's memory cgroup.
func TestDefaultPoolsAreSafe(t *testing.T) {
	pools := only[*v1alpha1.RdmaPool](decodeFile(t, staticFiles[0]))
	if len(pools) < 2 {
		t.Fatalf("the default install has %d pools, want the shared and the exclusive one", len(pools))
	}
	refused := map[string]string{
		"management devices": `{"charDevices":"management"}`,
		"diagnostics (umad)": `{"charDevices":"diagnostics"}`,
		"move":               `{"network":{"mode":"move"}}`,
		"macvlan":            `{"network":{"mode":"macvlan","ipam":"node"}}`,
		"ipoib":              `{"network":{"mode":"ipoib"}}`,
		"static address":     `{"network":{"addresses":["10.0.0.5/24"]}}`,
		"route":              `{"network":{"routes":[{"destination":"10.0.0.0/8"}]}}`,
		"keepHostAddress":    `{"network":{"keepHostAddress":true}}`,
		"allowedNetwork":     `{"allowedNetwork":{"modes":["move"]}}`,
	}
	for _, p := range pools {
		t.Run(p.Name, func(t *testing.T) {
			if p.Spec.Config == nil {
				t.Fatalf("pool %s has no config", p.Name)
			}
			class, err := v1alpha1.DecodeConfig(p.Spec.Config.Raw)
			if err != nil {
				t.Fatal(err)
			}
			if class.AllowedCharDevices == nil || *class.AllowedCharDevices != v1alpha1.CharDevicesVerbs {
				t.Errorf("pool %s: allowedCharDevices %v, want verbs", p.Name, class.AllowedCharDevices)
			}
			if class.AllowedNetwork != nil || (class.Network != nil && class.Network.Mode != nil && class.Network.Mode.Attaches()) {
				t.Errorf("pool %s: network %s, want none attached and none allowed", p.Name, p.Spec.Config.Raw)
			}
			// The plugin resolves a config as for a shared device unless the device is
			// exclusive: a legacy pool's device is shared by up to maxPods claims.
			shared := p.Spec.Mode != v1alpha1.PoolModeExclusive
			got, err := v1alpha1.Resolve(shared, []*v1alpha1.RdmaConfig{class}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if *got.CharDevices != v1alpha1.CharDevicesVerbs || got.Network.Mode.Attaches() || *got.Memlock != v1alpha1.MemlockUnset {
				t.Errorf("pool %s: a claim without config gets %s", p.Name, mustJSON(t, got))
			}
			for what, claim := range refused {
				c, err := v1alpha1.DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig",` + claim[1:]))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := v1alpha1.Resolve(shared, []*v1alpha1.RdmaConfig{class}, []*v1alpha1.RdmaConfig{c}); err == nil {
					t.Errorf("pool %s: a claim asking for %s (%s) is allowed", p.Name, what, claim)
				}
			}
			unlimited, err := v1alpha1.DecodeConfig([]byte(`{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","memlock":"unlimited"}`))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := v1alpha1.Resolve(shared, []*v1alpha1.RdmaConfig{class}, []*v1alpha1.RdmaConfig{unlimited}); err != nil {
				t.Errorf("pool %s: memlock unlimited refused (%v); the documented default allows it", p.Name, err)
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

package webhook

import (
	"strings"
	"testing"
)

// TestReviewEnforcesNetworkPolicy: the webhook refuses a claim's network section beyond
// its class's allowedNetwork when the claim is written, naming the field, the limit and
// the class, with the same rule prepare applies (v1alpha1.ExceedsLimits); what the class
// grants passes.
func TestReviewEnforcesNetworkPolicy(t *testing.T) {
	const head = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"`
	v := &Validator{DriverName: "rdma.dra.io", Class: classes(
		classWithConfig("rdma-shared", head+`,"allowedCharDevices":"verbs"}`),
		classWithConfig("roce-net", head+`,"network":{"mode":"macvlan","ipam":"node"},"allowedNetwork":{"addressPools":["rail0"],"staticAddressPrefixes":["10.200.0.0/24"]}}`),
	)}
	for _, tt := range []struct {
		name, class, params, want string
	}{
		{"macvlan on the default class", "rdma-shared", head + `,"network":{"mode":"macvlan"}}`,
			`spec.devices.config[1].opaque.parameters.network.mode: Forbidden: "macvlan" is not allowed: the DeviceClass configures no network attachment (allowedNetwork.modes is empty) (DeviceClass rdma-shared)`},
		{"move on the default class", "rdma-shared", head + `,"network":{"mode":"move"}}`, `parameters.network.mode: Forbidden`},
		{"a route on the default class", "rdma-shared", head + `,"network":{"routes":[{"destination":"10.0.0.0/8"}]}}`,
			`parameters.network.routes[0]: Forbidden: routes are not allowed: the DeviceClass's allowedNetwork.routePrefixes is empty (DeviceClass rdma-shared)`},
		{"keepHostAddress from a claim", "roce-net", head + `,"network":{"keepHostAddress":true}}`,
			`parameters.network.keepHostAddress: Forbidden: moves the node's own addresses into the pod: only a DeviceClass config may set it`},
		{"allowedNetwork from a claim", "roce-net", head + `,"allowedNetwork":{"modes":["move"]}}`,
			`parameters.allowedNetwork: Forbidden: is an admin limit`},
		{"the class's mode", "roce-net", head + `,"network":{"mode":"macvlan","socketInterface":true}}`, ""},
		{"a static address inside the grant", "roce-net", head + `,"network":{"addresses":["10.200.0.7/24"]}}`, ""},
		{"a static address outside the grant", "roce-net", head + `,"network":{"addresses":["10.200.1.7/24"]}}`,
			`parameters.network.addresses[0]: Forbidden: 10.200.1.7/24 is not inside one of the DeviceClass's allowedNetwork.staticAddressPrefixes ["10.200.0.0/24"] (DeviceClass roce-net)`},
		{"another mode than granted", "roce-net", head + `,"network":{"mode":"ipvlan"}}`,
			`"ipvlan" is not allowed: the DeviceClass's allowedNetwork.modes are ["macvlan"] (DeviceClass roce-net)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj := strings.Replace(claim("rdma.dra.io", tt.params), `"deviceClassName":"rdma-shared"`, `"deviceClassName":"`+tt.class+`"`, 1)
			r := decide(t, v, review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", obj))
			if r.Allowed != (tt.want == "") || (tt.want != "" && !strings.Contains(r.Result.Message, tt.want)) {
				t.Errorf("allowed %v, result %+v\nwant %q", r.Allowed, r.Result, tt.want)
			}
		})
	}
}

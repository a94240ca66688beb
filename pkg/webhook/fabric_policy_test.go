package webhook

import (
	"strings"
	"testing"
)

// TestReviewEnforcesFabricPolicy: the webhook refuses a claim's fabric settings beyond
// its class's allowedFabric when the claim is written, naming the field, the allowed
// values and the class, with the rule prepare applies (v1alpha1.ExceedsLimits);
// topologyFile and what the class grants pass.
func TestReviewEnforcesFabricPolicy(t *testing.T) {
	const head = `{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig"`
	v := &Validator{DriverName: "rdma.dra.io", Class: classes(
		classWithConfig("rdma-shared", head+`,"allowedCharDevices":"verbs"}`),
		classWithConfig("ib-qos", head+`,"fabric":{"trafficClass":106},"allowedFabric":{"trafficClasses":[106,104],"pkeys":["0x8001"],"maxQPsPerConnection":4}}`),
	)}
	for _, tt := range []struct {
		name, class, params, want string
	}{
		{"a traffic class on the default class", "rdma-shared", head + `,"fabric":{"trafficClass":106}}`,
			`spec.devices.config[1].opaque.parameters.fabric.trafficClass: Forbidden: is not allowed: the DeviceClass's allowedFabric.trafficClasses is empty (DeviceClass rdma-shared)`},
		{"a topology file on the default class", "rdma-shared", head + `,"fabric":{"topologyFile":true}}`, ""},
		{"allowedFabric from a claim", "ib-qos", head + `,"allowedFabric":{"serviceLevels":[1]}}`,
			`parameters.allowedFabric: Forbidden: is an admin limit: only a DeviceClass config may set it`},
		{"a granted traffic class and P_Key", "ib-qos", head + `,"fabric":{"trafficClass":104,"pkey":"0x8001","qpsPerConnection":4}}`, ""},
		{"a traffic class not granted", "ib-qos", head + `,"fabric":{"trafficClass":96}}`,
			`parameters.fabric.trafficClass: Forbidden: 96 is not one of the DeviceClass's allowedFabric.trafficClasses [106, 104] (DeviceClass ib-qos)`},
		{"more queue pairs than granted", "ib-qos", head + `,"fabric":{"qpsPerConnection":8}}`,
			`parameters.fabric.qpsPerConnection: Forbidden: 8 exceeds the DeviceClass's allowedFabric.maxQPsPerConnection 4 (DeviceClass ib-qos)`},
		{"an invalid value is refused before any limit", "ib-qos", head + `,"fabric":{"serviceLevel":16}}`,
			`parameters.fabric.serviceLevel: Invalid value: 16: must be from 0 to 15`},
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

// TestReviewRefusesBadFabricPolicy: a DeviceClass whose allowedFabric is invalid is
// refused when it is written, at the field.
func TestReviewRefusesBadFabricPolicy(t *testing.T) {
	v := &Validator{DriverName: "rdma.dra.io"}
	r := decide(t, v, review("resource.k8s.io", "v1", "DeviceClass", "CREATE",
		`{"spec":{"config":[{"opaque":{"driver":"rdma.dra.io","parameters":{"apiVersion":"rdma.dra.io/v1alpha1","kind":"RdmaConfig","allowedFabric":{"serviceLevels":[3,16]}}}}]}}`))
	const want = `spec.config[0].opaque.parameters.allowedFabric.serviceLevels[1]: Invalid value: 16: must be from 0 to 15`
	if r.Allowed || !strings.Contains(r.Result.Message, want) {
		t.Errorf("allowed %v, result %+v\nwant %q", r.Allowed, r.Result, want)
	}
}

package deployments

import (
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"

	"github.com/rdma-dra/rdma-dra-driver/pkg/addrlease"
)

// Issue 11, item 9: on 1.34 and 1.35 RBAC cannot limit the plugin's resourceclaims/status
// patch to its own node, nor its events to its own Node. These tests pin the chart's
// policies that do (templates/plugin-policy.yaml) and the Role that grants events in the
// default namespace only.

// pluginUser is the plugin's service account with a token bound to a pod on node.
func pluginUser(t *testing.T, objs []object, node string) userInfo {
	sa := pluginServiceAccount(t, objs)
	u := userInfo{name: serviceaccount.MakeUsername(sa.Namespace, sa.Name)}
	if node != "" {
		u.extra = map[string]any{serviceaccount.NodeNameKey: []any{node}}
	}
	return u
}

func checkDenyBinding(t *testing.T, policy *admissionregistrationv1.ValidatingAdmissionPolicy, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
	t.Helper()
	if len(binding.Spec.ValidationActions) != 1 || binding.Spec.ValidationActions[0] != admissionregistrationv1.Deny {
		t.Errorf("binding %s: validationActions %v, want [Deny]", binding.Name, binding.Spec.ValidationActions)
	}
	if policy.Spec.FailurePolicy == nil || *policy.Spec.FailurePolicy != admissionregistrationv1.Fail {
		t.Errorf("policy %s: failurePolicy want Fail", policy.Name)
	}
}

func TestClaimStatusPolicy(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	policy, binding := policyNamed(t, objs, "-claim-status")
	checkDenyBinding(t, policy, binding)
	rules := policy.Spec.MatchConstraints.ResourceRules
	if len(rules) != 1 || !slices.Equal(rules[0].Resources, []string{"resourceclaims/status"}) ||
		!slices.Contains(rules[0].Operations, admissionregistrationv1.Update) {
		t.Errorf("policy does not match updates of resourceclaims/status: %+v", rules)
	}
	validator := compilePolicy(t, policy)

	const driver = "rdma.dra.io"
	claim := func(node string, devices ...resourceapi.AllocatedDeviceStatus) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "ResourceClaim"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"},
			Status:     resourceapi.ResourceClaimStatus{Devices: devices},
		}
		if node != "" {
			c.Status.Allocation = &resourceapi.AllocationResult{
				Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
					{Request: "r", Driver: driver, Pool: node + "-rdma", Device: "mlx5-0-p1"},
					{Request: "g", Driver: "gpu.example.com", Pool: node, Device: "gpu-0"},
				}},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
				}}},
			}
		}
		return c
	}
	ours := func(node string) resourceapi.AllocatedDeviceStatus {
		return resourceapi.AllocatedDeviceStatus{Driver: driver, Pool: node + "-rdma", Device: "mlx5-0-p1",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}}
	}
	gpu := func(node, msg string) resourceapi.AllocatedDeviceStatus {
		return resourceapi.AllocatedDeviceStatus{Driver: "gpu.example.com", Pool: node, Device: "gpu-0",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Message: msg}}}
	}
	stolen := func(c *resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
		c.Status.ReservedFor = []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: "p", UID: "u"}}
		return c
	}
	moved := claim("node-a", ours("node-a"))
	moved.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values = []string{"node-b"}
	twoNodes := claim("node-a")
	twoNodes.Status.Allocation.NodeSelector.NodeSelectorTerms[0].MatchFields[0].Values = []string{"node-a", "node-b"}
	withConds := func(node string, types ...string) resourceapi.AllocatedDeviceStatus {
		ds := ours(node)
		for _, typ := range types {
			ds.Conditions = append(ds.Conditions, metav1.Condition{Type: typ, Status: metav1.ConditionTrue})
		}
		return ds
	}
	sa := pluginUser(t, objs, "node-a")

	tests := []struct {
		name     string
		user     userInfo
		obj, old *resourceapi.ResourceClaim
		wantDeny string
	}{
		{"own node, own driver's entry", sa, claim("node-a", ours("node-a")), claim("node-a"), ""},
		{"own node, keeps the GPU driver's entry", sa, claim("node-a", gpu("node-a", ""), ours("node-a")), claim("node-a", gpu("node-a", "")), ""},
		{"other node's claim", sa, claim("node-b", ours("node-b")), claim("node-b"), "may only change the status of claims allocated on its own node"},
		{"claim selecting more nodes", sa, twoNodes, twoNodes, "allocated on its own node"},
		{"unallocated claim", sa, claim(""), claim(""), "allocated on its own node"},
		{"another driver's entry", sa, claim("node-a", gpu("node-a", "forged")), claim("node-a", gpu("node-a", "")), "only change status.devices entries of driver rdma.dra.io"},
		{"removes another driver's entry", sa, claim("node-a", ours("node-a")), claim("node-a", gpu("node-a", "")), "entries of driver rdma.dra.io"},
		{"changes reservedFor", sa, stolen(claim("node-a")), claim("node-a"), "may not change a claim's allocation or reservedFor"},
		{"moves the allocation", sa, moved, claim("node-a"), "allocation or reservedFor"},
		{"token not bound to a node", pluginUser(t, objs, ""), claim("node-a", ours("node-a")), claim("node-a"), "not bound to a node"},
		{"own entry with the fabric binding conditions", sa, claim("node-a", withConds("node-a", "rdma.dra.io/FabricReady", "rdma.dra.io/FabricFailed")), claim("node-a", ours("node-a")), ""},
		{"own entry with another condition", sa, claim("node-a", withConds("node-a", "example.com/Attached")), claim("node-a", ours("node-a")),
			"may only set the conditions Ready, rdma.dra.io/FabricReady and rdma.dra.io/FabricFailed"},
		{"someone else is not matched", userInfo{name: "system:serviceaccount:kube-system:resourceclaim-controller"}, claim("node-b"), claim("node-b", ours("node-b")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request := map[string]any{"operation": "UPDATE", "subResource": "status",
				"userInfo": map[string]any{"username": tt.user.name, "extra": tt.user.extra}}
			applies, denials, err := validator.evaluate(request, toUnstructured(t, tt.obj), toUnstructured(t, tt.old))
			if err != nil {
				t.Fatal(err)
			}
			if !applies && tt.wantDeny != "" {
				t.Fatalf("the policy does not apply to %s", tt.user.name)
			}
			checkDenials(t, denials, tt.wantDeny)
		})
	}
}

func TestEventPolicy(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	policy, binding := policyNamed(t, objs, "-events")
	checkDenyBinding(t, policy, binding)
	validator := compilePolicy(t, policy)
	coreEvent := func(kind, name string) *corev1.Event {
		return &corev1.Event{
			TypeMeta:       metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta:     metav1.ObjectMeta{Namespace: "default", Name: "e"},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name},
			Reason:         "PortDown",
		}
	}
	newEvent := func(kind, name string) *eventsv1.Event {
		return &eventsv1.Event{
			TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "e"},
			Regarding:  corev1.ObjectReference{Kind: kind, Name: name},
		}
	}
	sa := pluginUser(t, objs, "node-a")
	tests := []struct {
		name     string
		user     userInfo
		op       string
		obj      any
		wantDeny string
	}{
		{"own Node", sa, "CREATE", toUnstructured(t, coreEvent("Node", "node-a")), ""},
		{"own Node, count patched", sa, "UPDATE", toUnstructured(t, coreEvent("Node", "node-a")), ""},
		{"own Node, events.k8s.io", sa, "CREATE", toUnstructured(t, newEvent("Node", "node-a")), ""},
		{"other Node", sa, "CREATE", toUnstructured(t, coreEvent("Node", "node-b")), "may only record events about its own Node"},
		{"other Node, events.k8s.io", sa, "CREATE", toUnstructured(t, newEvent("Node", "node-b")), "its own Node"},
		{"a Pod", sa, "CREATE", toUnstructured(t, coreEvent("Pod", "node-a")), "its own Node"},
		{"token not bound to a node", pluginUser(t, objs, ""), "CREATE", toUnstructured(t, coreEvent("Node", "node-a")), "not bound to a node"},
		{"someone else is not matched", userInfo{name: "system:node:node-b"}, "CREATE", toUnstructured(t, coreEvent("Pod", "x")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request := map[string]any{"operation": tt.op, "userInfo": map[string]any{"username": tt.user.name, "extra": tt.user.extra}}
			applies, denials, err := validator.evaluate(request, tt.obj, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !applies && tt.wantDeny != "" {
				t.Fatalf("the policy does not apply to %s", tt.user.name)
			}
			checkDenials(t, denials, tt.wantDeny)
		})
	}
}

// TestPluginEventsRole: the plugin may create and patch events in the default namespace
// only (where the events of Nodes go), not cluster-wide.
func TestPluginEventsRole(t *testing.T) {
	for _, file := range staticFiles {
		objs := decodeFile(t, file)
		sa := pluginServiceAccount(t, objs)
		for _, role := range only[*rbacv1.ClusterRole](objs) {
			for _, r := range role.Rules {
				if slices.Contains(r.Resources, "events") && strings.HasSuffix(role.Name, "-kubelet-plugin") {
					t.Errorf("%s: ClusterRole %s grants events cluster-wide", file, role.Name)
				}
			}
		}
		var role *rbacv1.Role
		for _, r := range only[*rbacv1.Role](objs) {
			if r.Name == sa.Name+"-events" {
				role = r
			}
		}
		if role == nil || role.Namespace != "default" {
			t.Fatalf("%s: no Role %s-events in namespace default", file, sa.Name)
		}
		want := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}
		if !slices.EqualFunc(role.Rules, want, func(a, b rbacv1.PolicyRule) bool {
			return slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) && slices.Equal(a.Verbs, b.Verbs) && len(a.ResourceNames) == 0
		}) {
			t.Errorf("%s: Role %s rules %+v, want %+v", file, role.Name, role.Rules, want)
		}
		bound := false
		for _, b := range only[*rbacv1.RoleBinding](objs) {
			if b.Namespace == "default" && b.RoleRef.Kind == "Role" && b.RoleRef.Name == role.Name {
				bound = slices.Equal(b.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}})
			}
		}
		if !bound {
			t.Errorf("%s: Role %s not bound to the plugin's service account alone", file, role.Name)
		}
	}
}

func checkDenials(t *testing.T, denials []string, wantDeny string) {
	t.Helper()
	got := strings.Join(denials, "; ")
	switch {
	case wantDeny == "" && got != "":
		t.Errorf("denied: %s", got)
	case wantDeny != "" && !strings.Contains(got, wantDeny):
		t.Errorf("denials %q, want one containing %q", got, wantDeny)
	}
}

// TestAddressLeasePolicy: the plugin reserves static addresses with Leases of its own
// node only (pkg/addrlease): it may create, take over and delete an address Lease whose
// node is its own, and nothing else of the namespace's Leases.
func TestAddressLeasePolicy(t *testing.T) {
	objs := decodeFile(t, staticFiles[0])
	policy, binding := policyNamed(t, objs, "-address-leases")
	checkDenyBinding(t, policy, binding)
	validator := compilePolicy(t, policy)
	lease := func(node string, address bool) any {
		l := &coordinationv1.Lease{
			TypeMeta:   metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
			ObjectMeta: metav1.ObjectMeta{Namespace: "rdma-dra-driver", Name: "rdma-addr-0ac80007"},
		}
		if node != "" {
			l.Annotations = map[string]string{addrlease.AnnotationNode: node}
		}
		if address {
			l.Labels = map[string]string{addrlease.LabelAddress: "true"}
		}
		return toUnstructured(t, l)
	}
	sa := pluginUser(t, objs, "node-a")
	tests := []struct {
		name           string
		user           userInfo
		op             string
		obj, old       any
		wantDeny       string
		wantNotApplies bool
	}{
		{name: "create its own", user: sa, op: "CREATE", obj: lease("node-a", true)},
		{name: "take over its own", user: sa, op: "UPDATE", obj: lease("node-a", true), old: lease("node-a", true)},
		{name: "release its own", user: sa, op: "DELETE", old: lease("node-a", true)},
		{name: "create for another node", user: sa, op: "CREATE", obj: lease("node-b", true), wantDeny: "may only write the address Leases of its own node"},
		{name: "take over another node's", user: sa, op: "UPDATE", obj: lease("node-a", true), old: lease("node-b", true), wantDeny: "its own node"},
		{name: "release another node's", user: sa, op: "DELETE", old: lease("node-b", true), wantDeny: "its own node"},
		{name: "a Lease that is no address", user: sa, op: "CREATE", obj: lease("node-a", false), wantDeny: "only write Leases that reserve static addresses"},
		{name: "delete a Lease without node", user: sa, op: "DELETE", old: lease("", false), wantDeny: "its own node"},
		{name: "token not bound to a node", user: pluginUser(t, objs, ""), op: "CREATE", obj: lease("node-a", true), wantDeny: "not bound to a node"},
		{name: "someone else is not matched", user: userInfo{name: "system:serviceaccount:kube-system:leader"}, op: "UPDATE", obj: lease("x", false), old: lease("y", false), wantNotApplies: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			request := map[string]any{"operation": tt.op, "userInfo": map[string]any{"username": tt.user.name, "extra": tt.user.extra}}
			applies, denials, err := validator.evaluate(request, tt.obj, tt.old)
			if err != nil {
				t.Fatal(err)
			}
			if applies == tt.wantNotApplies {
				t.Fatalf("policy applies %v to %s, want %v", applies, tt.user.name, !tt.wantNotApplies)
			}
			checkDenials(t, denials, tt.wantDeny)
		})
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// pluginClient returns a client that acts with the plugin's own credentials (the
// slice and claim policy tests use it): a
// ServiceAccount token bound to the plugin pod, so it carries the pod's node name.
func pluginClient(t *testing.T, ctx context.Context) kubernetes.Interface {
	t.Helper()
	pod, err := env.PluginPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := env.Client.CoreV1().ServiceAccounts(framework.Namespace).CreateToken(ctx, pod.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: ptr.To[int64](600),
			BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(env.REST)
	cfg.BearerToken = tok.Status.Token
	as, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return as
}

// TestPluginTokenOwnNodeClaimStatusOnly (issue 11, item 9): with the plugin's token, the
// status of a claim allocated on the plugin's node may be patched with entries of the
// plugin's driver; a claim of another node, another driver's entry and reservedFor may
// not. Events may be recorded about the plugin's own Node in the default
// namespace, nowhere else and about nothing else. On 1.36+ the API server's own
// resourceclaims/driver check may refuse first (Forbidden); either refusal counts.
func TestPluginTokenOwnNodeClaimStatusOnly(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	as := pluginClient(t, ctx)
	ns := env.NewNamespace(t, "claim-policy")
	const otherNode = "e2e-other-node"
	const otherDriver = "gpu.e2e.example.com"
	pool := func(node string) string { return node + "-rdma" }

	// allocated creates, as the admin, a claim allocated on node with one device of this
	// driver and one of another driver; nothing prepares it (no pod uses it).
	allocated := func(name, node string) *resourceapi.ResourceClaim {
		t.Helper()
		claims := env.Client.ResourceV1().ResourceClaims(ns)
		c, err := claims.Create(ctx, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{
				{Name: "rdma", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-shared"}},
				{Name: "gpu", Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: "rdma-shared"}},
			}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Status.Allocation = &resourceapi.AllocationResult{
			Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{
				{Request: "rdma", Driver: framework.DriverName, Pool: pool(node), Device: "e2e-device"},
				{Request: "gpu", Driver: otherDriver, Pool: node, Device: "gpu-0"},
			}},
			NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
			}}},
		}
		c, err = claims.UpdateStatus(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			t.Fatalf("allocate claim %s as admin: %v", name, err)
		}
		t.Cleanup(func() {
			// Deallocate first, so that the claim controller need not.
			if c, err := claims.Get(context.Background(), name, metav1.GetOptions{}); err == nil {
				c.Status = resourceapi.ResourceClaimStatus{}
				_, _ = claims.UpdateStatus(context.Background(), c, metav1.UpdateOptions{})
			}
			_ = claims.Delete(context.Background(), name, metav1.DeleteOptions{})
		})
		return c
	}
	// patchStatus merge-patches the status as the plugin, like its status writer
	// (a patch of resourceclaims/status; the plugin may not update).
	patchStatus := func(c *resourceapi.ResourceClaim, status map[string]any) error {
		data, err := json.Marshal(map[string]any{"status": status})
		if err != nil {
			t.Fatal(err)
		}
		_, err = as.ResourceV1().ResourceClaims(c.Namespace).Patch(ctx, c.Name, types.MergePatchType, data, metav1.PatchOptions{}, "status")
		return err
	}
	entry := func(driver, pool, device string) map[string]any {
		return map[string]any{"driver": driver, "pool": pool, "device": device,
			"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Prepared", "message": "e2e",
				"lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
	}

	own := allocated("own-node", env.Node)
	other := allocated("other-node", otherNode)

	t.Run("own node, own driver's entry is allowed", func(t *testing.T) {
		if err := patchStatus(own, map[string]any{"devices": []any{entry(framework.DriverName, pool(env.Node), "e2e-device")}}); err != nil {
			t.Fatalf("patch own node's claim status: %v", err)
		}
	})
	t.Run("another node's claim is denied", func(t *testing.T) {
		err := patchStatus(other, map[string]any{"devices": []any{entry(framework.DriverName, pool(otherNode), "e2e-device")}})
		expectRefused(t, err, "may only change the status of claims allocated on its own node")
	})
	t.Run("another driver's entry is denied", func(t *testing.T) {
		err := patchStatus(own, map[string]any{"devices": []any{
			entry(framework.DriverName, pool(env.Node), "e2e-device"),
			entry(otherDriver, env.Node, "gpu-0"),
		}})
		expectRefused(t, err, "may only change status.devices entries of driver "+framework.DriverName)
	})
	t.Run("reserving the claim is denied", func(t *testing.T) {
		// The allocation itself is immutable (validation refuses a change before any
		// policy runs); reservedFor is what a token could still abuse.
		err := patchStatus(own, map[string]any{"reservedFor": []any{
			map[string]any{"resource": "pods", "name": "e2e-not-a-pod", "uid": "6f1c2a3b-0000-4000-8000-000000000001"},
		}})
		expectRefused(t, err, "may not change a claim's allocation or reservedFor")
	})

	events := func(namespace string) func(*corev1.Event) error {
		return func(e *corev1.Event) error {
			created, err := as.CoreV1().Events(namespace).Create(ctx, e, metav1.CreateOptions{})
			if err == nil {
				_ = env.Client.CoreV1().Events(namespace).Delete(context.Background(), created.Name, metav1.DeleteOptions{})
			}
			return err
		}
	}
	event := func(kind, name string) *corev1.Event {
		now := metav1.Now()
		return &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: "e2e-plugin-policy-"},
			InvolvedObject: corev1.ObjectReference{Kind: kind, Name: name, APIVersion: "v1"},
			Reason:         "E2EPolicy", Message: "e2e", Type: corev1.EventTypeNormal,
			Source:         corev1.EventSource{Component: "rdma-dra-kubeletplugin", Host: env.Node},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
	}
	t.Run("an event about its own Node is allowed", func(t *testing.T) {
		if err := events(metav1.NamespaceDefault)(event("Node", env.Node)); err != nil {
			t.Fatalf("record own Node event: %v", err)
		}
	})
	t.Run("an event about another Node is denied", func(t *testing.T) {
		expectRefused(t, events(metav1.NamespaceDefault)(event("Node", otherNode)), "may only record events about its own Node")
	})
	t.Run("an event in another namespace is forbidden", func(t *testing.T) {
		err := events(ns)(event("Node", env.Node))
		if !apierrors.IsForbidden(err) {
			t.Fatalf("error %v; want Forbidden (events are granted in %s only)", err, metav1.NamespaceDefault)
		}
		t.Logf("forbidden: %v", err)
	})
}

// expectRefused wants the policy's denial with msg or, on clusters whose API server
// checks the node and driver of claim status writes itself (1.36+), its Forbidden.
func expectRefused(t *testing.T, err error, msg string) {
	t.Helper()
	// From 1.36 the API server checks the synthetic subresources resourceclaims/driver and
	// resourceclaims/binding itself, in validation: a 422 whose cause is a Forbidden
	// naming the permission the plugin lacks. On 1.34/1.35 the policy is what refuses.
	ownCheck := apierrors.IsInvalid(err) && strings.Contains(err.Error(), "Forbidden: changing status.") && strings.Contains(err.Error(), "requires resource=")
	if err != nil && (ownCheck || apierrors.IsForbidden(err) && !strings.Contains(err.Error(), "ValidatingAdmissionPolicy")) {
		t.Logf("refused by the API server's own authorization: %v", err)
		return
	}
	expectDenied(t, err, msg)
}

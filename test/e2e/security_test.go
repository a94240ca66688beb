package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/rdma-dra/rdma-dra-driver/test/e2e/framework"
)

// TestPluginTokenOwnNodeSlicesOnly acts with the plugin's own credentials, a ServiceAccount
// token bound to the plugin pod (so it carries the node name): the ValidatingAdmissionPolicy
// must refuse writing another node's ResourceSlices and allow its own node's.
func TestPluginTokenOwnNodeSlicesOnly(t *testing.T) {
	ctx := framework.Context(t, 3*time.Minute)
	as := pluginClient(t, ctx)
	pluginSlices := as.ResourceV1().ResourceSlices()
	adminSlices := env.Client.ResourceV1().ResourceSlices()
	slice := func(name, node string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: resourceapi.ResourceSliceSpec{
				Driver: framework.DriverName, NodeName: ptr.To(node),
				Pool:    resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1},
				Devices: []resourceapi.Device{{Name: "e2e-device"}},
			},
		}
	}
	const otherNode = "e2e-other-node"
	const denied = "may only"

	t.Run("create for another node is denied", func(t *testing.T) {
		_, err := pluginSlices.Create(ctx, slice("e2e-other-create", otherNode), metav1.CreateOptions{})
		if err == nil {
			_ = adminSlices.Delete(ctx, "e2e-other-create", metav1.DeleteOptions{})
		}
		expectDenied(t, err, "may only write ResourceSlices of its own node, not those of node "+otherNode)
	})

	t.Run("change and delete of another node's slice are denied", func(t *testing.T) {
		if _, err := adminSlices.Create(ctx, slice("e2e-other-existing", otherNode), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = adminSlices.Delete(context.Background(), "e2e-other-existing", metav1.DeleteOptions{}) })
		s, err := pluginSlices.Get(ctx, "e2e-other-existing", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Labels = map[string]string{"changed-by": "plugin-token"}
		_, err = pluginSlices.Update(ctx, s, metav1.UpdateOptions{})
		expectDenied(t, err, denied)
		err = pluginSlices.Delete(ctx, "e2e-other-existing", metav1.DeleteOptions{})
		expectDenied(t, err, denied)
	})

	t.Run("its own node's slice is allowed", func(t *testing.T) {
		if _, err := pluginSlices.Create(ctx, slice("e2e-own-node", env.Node), metav1.CreateOptions{}); err != nil {
			t.Fatalf("create own node's slice: %v", err)
		}
		// The plugin's ResourceSlice controller may already remove the unknown pool.
		if err := pluginSlices.Delete(ctx, "e2e-own-node", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("delete own node's slice: %v", err)
		}
	})
}

func expectDenied(t *testing.T, err error, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("allowed; want the ValidatingAdmissionPolicy to deny it (%q)", msg)
	}
	if !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Fatalf("error %v; want a policy denial", err)
	}
	if !strings.Contains(err.Error(), msg) {
		t.Fatalf("error %q does not say %q", err, msg)
	}
	t.Logf("denied: %v", err)
}

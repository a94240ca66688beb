package migrate

import (
	"strings"
	"testing"
)

// TestClassOfThePoolsName: a DeviceClass with the pool's name and extended resource is
// the migration applied before only when the controller keeps it for that pool; one made
// by anyone else keeps both, and is a problem.
func TestClassOfThePoolsName(t *testing.T) {
	class := func(labels, owner string) string {
		return `apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: hca-shared-devices-a
` + labels + owner + `spec: {extendedResourceName: rdma/hca_shared_devices_a}
`
	}
	const managed = "  labels: {app.kubernetes.io/managed-by: rdma-dra-controller}\n"
	const ownedByPool = "  ownerReferences: [{apiVersion: rdma.dra.io/v1alpha1, kind: RdmaPool, name: hca-shared-devices-a, uid: u1, controller: true}]\n"
	const ownedByOther = "  ownerReferences: [{apiVersion: rdma.dra.io/v1alpha1, kind: RdmaPool, name: other, uid: u1, controller: true}]\n"
	const foreign = `pool hca-shared-devices-a: metadata.name: a DeviceClass of that name serving rdma/hca_shared_devices_a exists (existing.yaml) and the controller did not make it: ` +
		`the controller would leave it alone and the pool would have no class, while pods asking for rdma/hca_shared_devices_a keep being served from that class's devices; ` +
		`delete the class (kubectl delete deviceclass hca-shared-devices-a) or rename the pool`
	for _, tt := range []struct {
		name, class, want string
	}{
		{"the controller's class of the pool", class(managed, ownedByPool), ""},
		{"a class made by hand", class("", ""), foreign},
		{"the label without the owner", class(managed, ""), foreign},
		{"the owner without the label", class("", ownedByPool), foreign},
		{"owned by another pool", class(managed, ownedByOther), foreign},
	} {
		t.Run(tt.name, func(t *testing.T) {
			res, err := FromSharedDevicePlugin([]byte(`{"configList":[{"resourceName":"hca_shared_devices_a","rdmaHcaMax":10,"selectors":{"vendors":["15b3"]}}]}`), Options{})
			if err != nil {
				t.Fatal(err)
			}
			existing, err := ExistingObjects([]byte(tt.class), "existing.yaml")
			if err != nil {
				t.Fatal(err)
			}
			res.CheckConflicts(existing)
			var got []string
			for _, p := range res.Problems {
				got = append(got, p.String())
			}
			if strings.Join(got, "\n") != tt.want {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), tt.want)
			}
		})
	}
}

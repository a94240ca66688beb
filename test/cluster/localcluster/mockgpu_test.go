package localcluster

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	dracel "k8s.io/dynamic-resource-allocation/cel"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mockgpu"
)

// decodeManifest decodes each document of a manifest with client-go's scheme, which
// refuses kinds and versions the API does not have.
func decodeManifest(t *testing.T, manifest string) []runtime.Object {
	t.Helper()
	var objs []runtime.Object
	for _, doc := range strings.Split(manifest, "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode manifest document: %v\n%s", err, doc)
		}
		objs = append(objs, obj)
	}
	return objs
}

func TestMockGPUManifest(t *testing.T) {
	const sysRoot = "/var/lib/rdma-dra-local/gb300/sys"
	l := NewLayout("/repo")
	tests := []struct {
		name       string
		digest     string
		wantAnnots map[string]string
	}{
		{name: "exported, without digest"},
		{name: "installed, with digest", digest: "sha256:0123", wantAnnots: map[string]string{"checksum/image": "sha256:0123"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var manifest string
			var err error
			if tt.digest == "" {
				manifest, err = l.MockGPUManifest(sysRoot)
			} else {
				manifest, err = l.mockGPUManifest(sysRoot, tt.digest)
			}
			if err != nil {
				t.Fatal(err)
			}
			if again, _ := l.mockGPUManifest(sysRoot, tt.digest); again != manifest {
				t.Errorf("the manifest differs between two calls")
			}
			var kinds []string
			var ds *appsv1.DaemonSet
			var role *rbacv1.ClusterRole
			var class *resourceapi.DeviceClass
			for _, o := range decodeManifest(t, manifest) {
				switch o := o.(type) {
				case *appsv1.DaemonSet:
					ds = o
				case *rbacv1.ClusterRole:
					role = o
				case *resourceapi.DeviceClass:
					class = o
				}
				kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
			}
			if want := []string{"Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "DaemonSet", "DeviceClass"}; !cmp.Equal(want, kinds) {
				t.Fatalf("kinds = %v, want %v", kinds, want)
			}
			checkMockGPUDaemonSet(t, ds, sysRoot, tt.wantAnnots)
			wantRules := []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"}},
				{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
			}
			if diff := cmp.Diff(wantRules, role.Rules); diff != "" {
				t.Errorf("ClusterRole rules mismatch (-want +got):\n%s", diff)
			}
			checkMockGPUClass(t, class)
		})
	}
}

func checkMockGPUDaemonSet(t *testing.T, ds *appsv1.DaemonSet, sysRoot string, wantAnnots map[string]string) {
	t.Helper()
	spec := ds.Spec.Template.Spec
	if ds.Namespace != MockGPUNamespace || ds.Name != MockGPUDaemonSet {
		t.Errorf("DaemonSet %s/%s, want %s/%s", ds.Namespace, ds.Name, MockGPUNamespace, MockGPUDaemonSet)
	}
	if diff := cmp.Diff(wantAnnots, ds.Spec.Template.Annotations); diff != "" {
		t.Errorf("pod template annotations mismatch (-want +got):\n%s", diff)
	}
	c := spec.Containers[0]
	if c.Image != MockGPUImage || c.ImagePullPolicy != corev1.PullNever {
		t.Errorf("image %s pull %s, want %s never pulled", c.Image, c.ImagePullPolicy, MockGPUImage)
	}
	if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
		t.Errorf("container is not privileged: %+v", c.SecurityContext)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
		if e.ValueFrom != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	wantEnv := map[string]string{"NODE_NAME": "spec.nodeName", "SYSFS_ROOT": sysRoot, "CDI_ROOT": "/var/run/cdi",
		"KUBELET_ROOT": "/var/lib/rdma-dra-local/kubelet", "LOG_VERBOSITY": "2"}
	if diff := cmp.Diff(wantEnv, env); diff != "" {
		t.Errorf("container environment mismatch (-want +got):\n%s", diff)
	}
	// Each hostPath at its own path, read-only only for the tree.
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		hostPaths[v.Name] = v.HostPath.Path
	}
	got := map[string]string{}
	for _, m := range c.VolumeMounts {
		if m.MountPath != hostPaths[m.Name] {
			t.Errorf("volume %s: host path %s mounted at %s", m.Name, hostPaths[m.Name], m.MountPath)
		}
		got[m.MountPath] = map[bool]string{true: "ro", false: "rw"}[m.ReadOnly]
	}
	want := map[string]string{
		"/var/lib/rdma-dra-local/kubelet/plugins/gpu.mock.rdma.dra.io": "rw",
		"/var/lib/rdma-dra-local/kubelet/plugins_registry":             "rw",
		"/var/run/cdi": "rw",
		sysRoot:        "ro",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mounts mismatch (-want +got):\n%s", diff)
	}
}

// checkMockGPUClass evaluates the class's selector with the scheduler's CEL library on a
// published mock GPU and on an RDMA port.
func checkMockGPUClass(t *testing.T, class *resourceapi.DeviceClass) {
	t.Helper()
	if class.Name != MockGPUDeviceClass || len(class.Spec.Selectors) != 1 {
		t.Fatalf("DeviceClass %s with %d selectors, want %s with one", class.Name, len(class.Spec.Selectors), MockGPUDeviceClass)
	}
	sel := dracel.GetCompiler(dracel.Features{}).CompileCELExpression(class.Spec.Selectors[0].CEL.Expression, dracel.Options{})
	if sel.Error != nil {
		t.Fatalf("selector does not compile: %v", sel.Error)
	}
	gpu := mockgpu.Device(mockgpu.GPU{Name: "gpu-0", BusID: "0000:1b:00.0", PCIeRoot: "pci0000:18", DeviceID: "2330"})
	for _, tc := range []struct {
		driver string
		want   bool
	}{{mockgpu.DriverName, true}, {DriverName, false}} {
		got, _, err := sel.DeviceMatches(context.Background(), dracel.Device{Driver: tc.driver, Attributes: gpu.Attributes})
		if err != nil || got != tc.want {
			t.Errorf("selector on a device of driver %s = %v, %v; want %v", tc.driver, got, err, tc.want)
		}
	}
}

// The docs name what a pod author types and sees: the class and the environment.
func TestMockGPUDocs(t *testing.T) {
	data, err := os.ReadFile("../../../docs/local-cluster.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Mock GPUs\n")
	if !ok {
		t.Fatal("docs/local-cluster.md has no section \"Mock GPUs\"")
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, want := range []string{MockGPUDeviceClass, MockGPUNamespace, MockGPUImage, mockgpu.EnvBusIDs, mockgpu.EnvRoots, mockgpu.EnvBusIDPrefix,
		string(mockgpu.AttrIndex), string(mockgpu.AttrNUMANode), string(mockgpu.AttrModel), mockgpu.PoolName("<node>")} {
		if !strings.Contains(section, want) {
			t.Errorf("the Mock GPUs section of docs/local-cluster.md does not mention %s", want)
		}
	}
}

func TestImageArchive(t *testing.T) {
	l := NewLayout("/repo")
	for ref, want := range map[string]string{
		PauseImage:   "/repo/_output/local-cluster/images/pause_latest.oci.tar",
		MockGPUImage: "/repo/_output/local-cluster/images/mockgpu_latest.oci.tar",
	} {
		if got := l.imageArchive(ref); got != want {
			t.Errorf("imageArchive(%s) = %s, want %s", ref, got, want)
		}
	}
}

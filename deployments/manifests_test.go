package deployments

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
)

// staticFiles are the renders of the chart's templates `make manifests` writes; every test
// runs on each.
var staticFiles = []string{
	"static/rdma-dra-driver.yaml",
	"static/rdma-dra-driver-mock.yaml",
}

// staticCRDFile is the render of the chart's CRDs, which users apply before staticFiles.
const staticCRDFile = "static/rdma-dra-driver-crds.yaml"

// object is one decoded manifest document.
type object struct {
	file string
	obj  runtime.Object
}

// newTyped returns an empty object of the Go type that apiVersion/kind decode into, or
// nil for kinds the manifests must not contain.
func newTyped(apiVersion, kind string) runtime.Object {
	switch apiVersion + " " + kind {
	case "v1 Namespace":
		return &corev1.Namespace{}
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}
	case "v1 Secret":
		return &corev1.Secret{}
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}
	case "v1 Service":
		return &corev1.Service{}
	case "v1 Pod":
		return &corev1.Pod{}
	case "apps/v1 DaemonSet":
		return &appsv1.DaemonSet{}
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}
	case "batch/v1 Job":
		return &batchv1.Job{}
	case "rbac.authorization.k8s.io/v1 ClusterRole":
		return &rbacv1.ClusterRole{}
	case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}
	case "rbac.authorization.k8s.io/v1 Role":
		return &rbacv1.Role{}
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		return &rbacv1.RoleBinding{}
	case "admissionregistration.k8s.io/v1 ValidatingWebhookConfiguration":
		return &admissionregistrationv1.ValidatingWebhookConfiguration{}
	case "apiextensions.k8s.io/v1 CustomResourceDefinition":
		return &apiextensionsv1.CustomResourceDefinition{}
	case "rdma.dra.io/v1alpha1 RdmaPool":
		return &v1alpha1.RdmaPool{}
	case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy":
		return &admissionregistrationv1.ValidatingAdmissionPolicy{}
	case "admissionregistration.k8s.io/v1 ValidatingAdmissionPolicyBinding":
		return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}
	case "resource.k8s.io/v1 DeviceClass":
		return &resourceapi.DeviceClass{}
	case "resource.k8s.io/v1 ResourceClaim":
		return &resourceapi.ResourceClaim{}
	case "resource.k8s.io/v1 ResourceClaimTemplate":
		return &resourceapi.ResourceClaimTemplate{}
	case "kubeflow.org/v2beta1 MPIJob":
		return &mpiJob{}
	}
	return nil
}

// decodeFile splits a multi-document YAML file and decodes every document strictly into
// its API type: an unknown or misspelled field, a wrong type or an unexpected kind fails.
func decodeFile(t *testing.T, file string) []object {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("read manifests: %v", err)
	}
	objs, err := decodeManifests(file, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatalf("%s: no objects", file)
	}
	return objs
}

func decodeManifests(file string, data []byte) ([]object, error) {
	var out []object
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: split document %d: %w", file, i, err)
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", file, i, err)
		}
		if tm.APIVersion == "" && tm.Kind == "" {
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue // comments only
			}
			return nil, fmt.Errorf("%s: document %d has no apiVersion and kind", file, i)
		}
		obj := newTyped(tm.APIVersion, tm.Kind)
		if obj == nil {
			return nil, fmt.Errorf("%s: document %d: unexpected %s %s", file, i, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("%s: document %d (%s): %w", file, i, tm.Kind, err)
		}
		out = append(out, object{file: file, obj: obj})
	}
}

func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for line := range strings.SplitSeq(string(doc), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			b.WriteString(line + "\n")
		}
	}
	return b.Bytes()
}

// only returns the objects of type T.
func only[T runtime.Object](objs []object) []T {
	var out []T
	for _, o := range objs {
		if v, ok := o.obj.(T); ok {
			out = append(out, v)
		}
	}
	return out
}

// one returns the single object of type T or fails.
func one[T runtime.Object](t *testing.T, objs []object) T {
	t.Helper()
	all := only[T](objs)
	if len(all) != 1 {
		var zero T
		t.Fatalf("want exactly one %T, got %d", zero, len(all))
	}
	return all[0]
}

func TestStaticManifestsDecodeStrictly(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, fmt.Sprintf("%T", o.obj))
			}
			sort.Strings(kinds)
			want := []string{
				"*v1.ClusterRole", "*v1.ClusterRole", "*v1.ClusterRoleBinding", "*v1.ClusterRoleBinding",
				"*v1.DaemonSet", "*v1.Deployment", "*v1.Namespace", "*v1.NetworkPolicy",
				"*v1.Role", "*v1.Role", "*v1.Role", "*v1.RoleBinding", "*v1.RoleBinding", "*v1.RoleBinding",
				"*v1.Secret", "*v1.Service", "*v1.Service", "*v1.ServiceAccount", "*v1.ServiceAccount",
				"*v1.ValidatingAdmissionPolicy", "*v1.ValidatingAdmissionPolicy", "*v1.ValidatingAdmissionPolicy", "*v1.ValidatingAdmissionPolicy", "*v1.ValidatingAdmissionPolicy",
				"*v1.ValidatingAdmissionPolicyBinding", "*v1.ValidatingAdmissionPolicyBinding", "*v1.ValidatingAdmissionPolicyBinding", "*v1.ValidatingAdmissionPolicyBinding", "*v1.ValidatingAdmissionPolicyBinding",
				"*v1.ValidatingWebhookConfiguration",
				"*v1alpha1.RdmaPool", "*v1alpha1.RdmaPool",
			}
			if strings.Join(kinds, " ") != strings.Join(want, " ") {
				t.Errorf("objects:\n got %v\nwant %v", kinds, want)
			}
		})
	}
	t.Run(filepath.Base(staticCRDFile), func(t *testing.T) {
		objs := decodeFile(t, staticCRDFile)
		if len(objs) != 1 {
			t.Fatalf("%d objects, want the RdmaPool CRD alone", len(objs))
		}
		crd, ok := objs[0].obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || crd.Name != "rdmapools.rdma.dra.io" {
			t.Errorf("got %T %v, want the CustomResourceDefinition rdmapools.rdma.dra.io", objs[0].obj, objs[0].obj)
		}
	})
}

func TestDecodeRejectsBadManifests(t *testing.T) {
	tests := []struct {
		name, doc, wantErr string
	}{
		{"unknown field", "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\nautomount: true\n", "unknown field"},
		{"misspelled nested field", "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: a}\nspec: {selector: []}\n", "unknown field"},
		{"unexpected kind", "apiVersion: v1\nkind: Endpoints\nmetadata: {name: a}\n", "unexpected v1 Endpoints"},
		{"no kind", "metadata: {name: a}\n", "no apiVersion and kind"},
		{"duplicate field", "apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\nmetadata: {name: b}\n", "already set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := decodeManifests("test.yaml", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("decode: got error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

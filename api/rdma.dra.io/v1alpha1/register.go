package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// SchemeBuilder registers the API's objects (RdmaPool and RdmaPoolList) in a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the API's objects to a scheme; the generated clientset
	// (pkg/client) registers them with it.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource returns the group and resource of a resource of this API; the generated
// listers name the resource of their NotFound errors with it.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

// addKnownTypes registers the objects the API server serves. RdmaConfig is not among
// them: it only travels inside DeviceClasses and ResourceClaims.
func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &RdmaPool{}, &RdmaPoolList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}

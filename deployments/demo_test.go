package deployments

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	rdmav1alpha1 "github.com/rdma-dra/rdma-dra-driver/api/rdma.dra.io/v1alpha1"
	"github.com/rdma-dra/rdma-dra-driver/pkg/devicemodel"
)

// mpiJob is the part of the Kubeflow MPI Operator's MPIJob (kubeflow.org/v2beta1) the NCCL
// demo uses; a field outside it fails the strict decoding, so keep it to what the
// operator defines.
type mpiJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              struct {
		SlotsPerWorker *int32 `json:"slotsPerWorker,omitempty"`
		RunPolicy      struct {
			CleanPodPolicy string `json:"cleanPodPolicy,omitempty"`
		} `json:"runPolicy,omitempty"`
		MPIReplicaSpecs map[string]struct {
			Replicas *int32                 `json:"replicas,omitempty"`
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"mpiReplicaSpecs"`
	} `json:"spec"`
}

func (j *mpiJob) DeepCopyObject() runtime.Object { panic("not used") }

// The images the demos may use: the toolbox for mock clusters, placeholders the README
// tells users to replace for real clusters.
const toolboxImage = "localhost/toolbox:latest"

var placeholderImages = []string{"registry.example.com/rdma/perftest:latest", "registry.example.com/ml/nccl-tests:latest"}

// demoFiles returns every manifest below demo/, except the kind cluster config.
func demoFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir("../demo", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "kind" {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".yaml") {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 7 {
		t.Fatalf("found %d demo manifests, want at least 7: %v", len(files), files)
	}
	return files
}

// podSpecs returns the pod specs an object runs, by where they are.
func podSpecs(obj runtime.Object) map[string]*corev1.PodSpec {
	switch o := obj.(type) {
	case *corev1.Pod:
		return map[string]*corev1.PodSpec{"": &o.Spec}
	case *appsv1.Deployment:
		return map[string]*corev1.PodSpec{"": &o.Spec.Template.Spec}
	case *appsv1.DaemonSet:
		return map[string]*corev1.PodSpec{"": &o.Spec.Template.Spec}
	case *batchv1.Job:
		return map[string]*corev1.PodSpec{"": &o.Spec.Template.Spec}
	case *mpiJob:
		out := map[string]*corev1.PodSpec{}
		for name, r := range o.Spec.MPIReplicaSpecs {
			out[name] = &r.Template.Spec
		}
		return out
	}
	return nil
}

// claimSpecs returns the ResourceClaimSpecs of the claims and templates in objs, by name.
func claimSpecs(objs []object) map[string]resourceapi.ResourceClaimSpec {
	out := map[string]resourceapi.ResourceClaimSpec{}
	for _, o := range objs {
		switch c := o.obj.(type) {
		case *resourceapi.ResourceClaim:
			out["claim/"+c.Name] = c.Spec
		case *resourceapi.ResourceClaimTemplate:
			out["template/"+c.Name] = c.Spec.Spec
		}
	}
	return out
}

// TestDemoManifests decodes every demo strictly and checks what a copy-paste user relies
// on: claims name existing DeviceClasses, CEL compiles with the allocator's compiler and
// reads only attributes the device model publishes, matchAttribute names one, pods refer
// to claims and templates that exist, and opaque configs are valid RdmaConfigs.
func TestDemoManifests(t *testing.T) {
	// The controller names each pool's DeviceClass after the pool; a demo may bring pools
	// of its own (an admin's grant of network attachment).
	chartPools := only[*rdmav1alpha1.RdmaPool](decodeFile(t, staticFiles[0]))
	foreignClasses := sets.New("gpu.nvidia.com", "gpu.mock.rdma.dra.io") // other drivers': NVIDIA's (README), the local cluster's mock GPUs (docs/local-cluster.md)
	knownAttrs, _ := knownNames()

	for _, file := range demoFiles(t) {
		t.Run(strings.TrimPrefix(file, "../demo/"), func(t *testing.T) {
			objs := decodeFile(t, file)
			classes := poolConfigs(t, append(slices.Clone(chartPools), only[*rdmav1alpha1.RdmaPool](objs)...))
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), "README.md")); err != nil {
				t.Errorf("no README.md next to the manifest: %v", err)
			}
			claims := claimSpecs(objs)
			for name, spec := range claims {
				checkClaimSpec(t, name, spec, classes, foreignClasses, knownAttrs)
			}
			namespaces := sets.New[string]()
			for _, ns := range only[*corev1.Namespace](objs) {
				namespaces.Insert(ns.Name)
			}
			checkAdminAccess(t, objs)
			for _, o := range objs {
				m := o.obj.(metav1.Object)
				_, isNS := o.obj.(*corev1.Namespace)
				_, isPool := o.obj.(*rdmav1alpha1.RdmaPool) // cluster-scoped
				if !isNS && !isPool && !namespaces.Has(m.GetNamespace()) {
					t.Errorf("%T %s is in namespace %q, which the file does not create", o.obj, m.GetName(), m.GetNamespace())
				}
				for where, pod := range podSpecs(o.obj) {
					checkPod(t, m.GetName()+where, pod, claims)
				}
			}
		})
	}
}

// poolConfigs returns the RdmaConfig of each pool's DeviceClass by name (nil for a pool
// without config).
func poolConfigs(t *testing.T, pools []*rdmav1alpha1.RdmaPool) map[string]*rdmav1alpha1.RdmaConfig {
	t.Helper()
	out := map[string]*rdmav1alpha1.RdmaConfig{}
	for _, p := range pools {
		out[p.Name] = nil
		if p.Spec.Config == nil {
			continue
		}
		c, err := rdmav1alpha1.DecodeConfig(p.Spec.Config.Raw)
		if err != nil {
			t.Fatalf("pool %s: %v", p.Name, err)
		}
		out[p.Name] = c
	}
	return out
}

// checkClaimSpec checks one claim of a demo; classes are the RdmaConfigs of the driver's
// DeviceClasses, whose admin limits the claim's configs must keep.
func checkClaimSpec(t *testing.T, name string, spec resourceapi.ResourceClaimSpec, classes map[string]*rdmav1alpha1.RdmaConfig, foreign, knownAttrs sets.Set[string]) {
	t.Helper()
	requests := sets.New[string]()
	type sub struct {
		name, class string
		selectors   []resourceapi.DeviceSelector
		capacity    *resourceapi.CapacityRequirements
	}
	var subs []sub
	for _, r := range spec.Devices.Requests {
		requests.Insert(r.Name)
		switch {
		case r.Exactly != nil && len(r.FirstAvailable) == 0:
			subs = append(subs, sub{r.Name, r.Exactly.DeviceClassName, r.Exactly.Selectors, r.Exactly.Capacity})
		case r.Exactly == nil && len(r.FirstAvailable) > 0:
			for _, s := range r.FirstAvailable {
				requests.Insert(r.Name + "/" + s.Name)
				subs = append(subs, sub{r.Name + "/" + s.Name, s.DeviceClassName, s.Selectors, s.Capacity})
			}
		default:
			t.Errorf("%s: request %s needs exactly one of exactly and firstAvailable", name, r.Name)
		}
	}
	for _, s := range subs {
		_, ours := classes[s.class]
		if !ours && !foreign.Has(s.class) {
			t.Errorf("%s: request %s uses DeviceClass %q, which neither the chart nor the README provides", name, s.name, s.class)
		}
		for _, sel := range s.selectors {
			if sel.CEL == nil {
				t.Errorf("%s: request %s: selector without CEL", name, s.name)
				continue
			}
			if res := celCompiler.CompileCELExpression(sel.CEL.Expression, dracelOptions()); res.Error != nil {
				t.Errorf("%s: request %s: CEL %q: %v", name, s.name, sel.CEL.Expression, res.Error)
			}
			attrs, caps := celNames(sel.CEL.Expression)
			checkNames(t, name+" request "+s.name, attrs, caps)
		}
		if s.capacity != nil {
			if !ours || s.class != "rdma-shared" {
				t.Errorf("%s: request %s asks for capacity from %s; only rdma-shared devices have shares", name, s.name, s.class)
			}
			for c := range s.capacity.Requests {
				if string(c) != string(devicemodel.SharesCapacity) {
					t.Errorf("%s: request %s asks for capacity %s, want %s", name, s.name, c, devicemodel.SharesCapacity)
				}
			}
		}
	}
	for i, c := range spec.Devices.Constraints {
		for _, r := range c.Requests {
			if !requests.Has(r) {
				t.Errorf("%s: constraint %d names request %q, which does not exist", name, i, r)
			}
		}
		if c.MatchAttribute == nil {
			t.Errorf("%s: constraint %d has no matchAttribute", name, i)
		} else if !knownAttrs.Has(string(*c.MatchAttribute)) {
			t.Errorf("%s: constraint %d matches %s, which the device model does not publish", name, i, *c.MatchAttribute)
		}
	}
	for i, cfg := range spec.Devices.Config {
		for _, r := range cfg.Requests {
			if !requests.Has(r) {
				t.Errorf("%s: config %d names request %q, which does not exist", name, i, r)
			}
		}
		if cfg.Opaque == nil || cfg.Opaque.Driver != devicemodel.DefaultDriverName {
			t.Errorf("%s: config %d: want opaque parameters for %s", name, i, devicemodel.DefaultDriverName)
			continue
		}
		c, err := rdmav1alpha1.DecodeConfig(cfg.Opaque.Parameters.Raw)
		if err != nil {
			t.Errorf("%s: config %d: %v", name, i, err)
			continue
		}
		if errs := c.ValidateFor(field.NewPath("parameters"), rdmav1alpha1.SourceClaim); len(errs) > 0 {
			t.Errorf("%s: config %d: %v", name, i, errs.ToAggregate())
		}
		// What the webhook and prepare refuse: a value beyond the class's admin limits.
		for _, s := range subs {
			if len(cfg.Requests) > 0 && !slices.Contains(cfg.Requests, s.name) {
				continue
			}
			if errs := rdmav1alpha1.ExceedsLimits(field.NewPath("parameters"), c, []*rdmav1alpha1.RdmaConfig{classes[s.class]}); len(errs) > 0 {
				t.Errorf("%s: config %d exceeds the limits of DeviceClass %s: %v", name, i, s.class, errs.ToAggregate())
			}
		}
	}
}

func checkPod(t *testing.T, name string, pod *corev1.PodSpec, claims map[string]resourceapi.ResourceClaimSpec) {
	t.Helper()
	podClaims := sets.New[string]()
	for _, c := range pod.ResourceClaims {
		podClaims.Insert(c.Name)
		switch {
		case c.ResourceClaimName != nil:
			if _, ok := claims["claim/"+*c.ResourceClaimName]; !ok {
				t.Errorf("pod %s: ResourceClaim %s is not in the file", name, *c.ResourceClaimName)
			}
		case c.ResourceClaimTemplateName != nil:
			if _, ok := claims["template/"+*c.ResourceClaimTemplateName]; !ok {
				t.Errorf("pod %s: ResourceClaimTemplate %s is not in the file", name, *c.ResourceClaimTemplateName)
			}
		default:
			t.Errorf("pod %s: claim %s names neither a claim nor a template", name, c.Name)
		}
	}
	used := sets.New[string]()
	for _, c := range pod.Containers {
		if c.Image != toolboxImage && !slices.Contains(placeholderImages, c.Image) {
			t.Errorf("pod %s: container %s uses image %q; demos use %s or a documented placeholder", name, c.Name, c.Image, toolboxImage)
		}
		if c.ImagePullPolicy != corev1.PullIfNotPresent {
			t.Errorf("pod %s: container %s: want imagePullPolicy IfNotPresent", name, c.Name)
		}
		for _, rc := range c.Resources.Claims {
			if !podClaims.Has(rc.Name) {
				t.Errorf("pod %s: container %s uses claim %s, which the pod does not declare", name, c.Name, rc.Name)
			}
			used.Insert(rc.Name)
		}
	}
	if unused := podClaims.Difference(used); unused.Len() > 0 {
		t.Errorf("pod %s: claims %v are used by no container", name, sets.List(unused))
	}
}

// checkAdminAccess: a claim or template that asks for admin access is in a namespace the
// file creates with the label the API requires for it (resource.kubernetes.io/admin-access),
// or the API server refuses it.
func checkAdminAccess(t *testing.T, objs []object) {
	t.Helper()
	admin := sets.New[string]()
	for _, ns := range only[*corev1.Namespace](objs) {
		if ns.Labels[resourceapi.DRAAdminNamespaceLabelKey] == "true" {
			admin.Insert(ns.Name)
		}
	}
	check := func(kind, ns, name string, spec resourceapi.ResourceClaimSpec) {
		for _, r := range spec.Devices.Requests {
			if r.Exactly != nil && r.Exactly.AdminAccess != nil && *r.Exactly.AdminAccess && !admin.Has(ns) {
				t.Errorf("%s %s/%s: request %s asks for admin access, but the file does not create namespace %s with %s: \"true\"",
					kind, ns, name, r.Name, ns, resourceapi.DRAAdminNamespaceLabelKey)
			}
		}
	}
	for _, c := range only[*resourceapi.ResourceClaim](objs) {
		check("ResourceClaim", c.Namespace, c.Name, c.Spec)
	}
	for _, c := range only[*resourceapi.ResourceClaimTemplate](objs) {
		check("ResourceClaimTemplate", c.Namespace, c.Name, c.Spec.Spec)
	}
}

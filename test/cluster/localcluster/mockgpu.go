package localcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/controlplane"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/mockgpu"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/ociimage"
)

// The mock GPU driver on the local cluster (test/cluster/mockgpu, docs/local-cluster.md
// "Mock GPUs"): a second DRA driver whose GPUs claims pair with RDMA ports.
const (
	// MockGPUImage is the driver's image, built and imported by InstallMockGPU.
	MockGPUImage = "localhost/mockgpu:latest"
	// MockGPUNamespace holds the driver's DaemonSet and service account.
	MockGPUNamespace = "mock-gpu"
	// MockGPUDaemonSet runs the driver's kubelet plugin on the node.
	MockGPUDaemonSet = "mock-gpu-kubelet-plugin"
	// MockGPUDeviceClass selects every mock GPU; it is named after the driver.
	MockGPUDeviceClass = mockgpu.DriverName
	// mockGPUName names the service account, ClusterRole and ClusterRoleBinding.
	mockGPUName = MockGPUDaemonSet
	// mockGPUImageAnnotation on the plugin's pod template carries the image's digest, so
	// that applying the manifest after a rebuild restarts the plugin on the new image
	// (the tag stays latest).
	mockGPUImageAnnotation = "checksum/image"
	// cdiDir is the CDI spec directory of the cluster's containerd that the kubelet
	// plugins write into.
	cdiDir = "/var/run/cdi"
)

// MockGPUCDISpecGlob matches the mock GPU driver's per-claim CDI specs on the host.
var MockGPUCDISpecGlob = mockgpu.SpecGlob(cdiDir)

// MockGPUManifest returns the objects that run the mock GPU driver on this cluster,
// publishing the GPUs of the sysfs tree sysRoot, as multi-document YAML for kubectl
// apply: the namespace MockGPUNamespace, a service account with a ClusterRole of exactly
// what the kubeletplugin helper calls, the DaemonSet MockGPUDaemonSet (privileged,
// MockGPUImage, the kubelet's plugin directories, the CDI directory and sysRoot as
// hostPaths at their own paths) and the DeviceClass MockGPUDeviceClass. Applying it
// again with another sysRoot (another mock node's tree) restarts the plugin on that tree.
func (l Layout) MockGPUManifest(sysRoot string) (string, error) {
	return l.mockGPUManifest(sysRoot, "")
}

// mockGPUManifest is MockGPUManifest with the image digest annotated on the pod
// template when imageDigest is not empty.
func (l Layout) mockGPUManifest(sysRoot, imageDigest string) (string, error) {
	objects := []runtime.Object{
		&corev1.Namespace{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: MockGPUNamespace, Labels: map[string]string{
				// The plugin runs privileged with hostPaths.
				"pod-security.kubernetes.io/enforce": "privileged",
			}},
		},
		&corev1.ServiceAccount{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: mockGPUName, Namespace: MockGPUNamespace},
		},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: mockGPUName},
			Rules:      mockGPURules(),
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: mockGPUName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: mockGPUName, Namespace: MockGPUNamespace}},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: mockGPUName},
		},
		l.mockGPUDaemonSet(sysRoot, imageDigest),
		&resourceapi.DeviceClass{
			TypeMeta:   metav1.TypeMeta{APIVersion: "resource.k8s.io/v1", Kind: "DeviceClass"},
			ObjectMeta: metav1.ObjectMeta{Name: MockGPUDeviceClass},
			Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
				CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", mockgpu.DriverName)},
			}}},
		},
	}
	docs := make([]string, 0, len(objects))
	for _, o := range objects {
		// Without the empty status that typed objects carry: none of it is applied.
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return "", fmt.Errorf("convert %T of the mock GPU driver: %w", o, err)
		}
		delete(u, "status")
		data, err := yaml.Marshal(u)
		if err != nil {
			return "", fmt.Errorf("encode %T of the mock GPU driver: %w", o, err)
		}
		docs = append(docs, string(data))
	}
	return "# The local cluster's mock GPU driver (docs/local-cluster.md, Mock GPUs).\n" + strings.Join(docs, "---\n"), nil
}

// mockGPURules are the plugin's permissions: what the kubeletplugin helper and its
// ResourceSlice controller call, nothing more (the RDMA chart's rbac.yaml, without what
// only the RDMA plugin does). nodes get: the controller reads its Node once for the owner
// reference. resourceslices: it lists and watches the driver's slices and writes them.
// resourceclaims get: the helper reads each claim the kubelet asks to prepare.
func mockGPURules() []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices"}, Verbs: []string{"list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceclaims"}, Verbs: []string{"get"}},
	}
}

// mockGPUDaemonSet runs the plugin on the node. Every host directory is mounted at its
// own path, so that the paths the plugin hands the kubelet (sockets) and the runtime (CDI)
// are valid on the host; the sysfs tree's links are relative and stay inside sysRoot.
func (l Layout) mockGPUDaemonSet(sysRoot, imageDigest string) *appsv1.DaemonSet {
	paths := mockgpu.Config{KubeletRoot: l.KubeletRoot()}
	labels := map[string]string{"app.kubernetes.io/name": "mock-gpu", "app.kubernetes.io/component": "kubelet-plugin"}
	var annotations map[string]string
	if imageDigest != "" {
		annotations = map[string]string{mockGPUImageAnnotation: imageDigest}
	}
	type hostDir struct {
		name, path string
		kind       corev1.HostPathType
		readOnly   bool
	}
	dirs := []hostDir{
		{"plugin-dir", paths.DataDir(), corev1.HostPathDirectoryOrCreate, false},
		{"registry-dir", paths.RegistrarDir(), corev1.HostPathDirectory, false},
		{"cdi", cdiDir, corev1.HostPathDirectoryOrCreate, false},
		{"sysfs", sysRoot, corev1.HostPathDirectory, true},
	}
	var volumes []corev1.Volume
	var mounts []corev1.VolumeMount
	for _, d := range dirs {
		volumes = append(volumes, corev1.Volume{Name: d.name, VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: d.path, Type: ptr.To(d.kind)},
		}})
		mounts = append(mounts, corev1.VolumeMount{Name: d.name, MountPath: d.path, ReadOnly: d.readOnly})
	}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: MockGPUDaemonSet, Namespace: MockGPUNamespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations},
				Spec: corev1.PodSpec{
					ServiceAccountName: mockGPUName,
					Tolerations:        []corev1.Toleration{{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
					Containers: []corev1.Container{{
						Name:            "plugin",
						Image:           MockGPUImage,
						ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "SYSFS_ROOT", Value: sysRoot},
							{Name: "CDI_ROOT", Value: cdiDir},
							{Name: "KUBELET_ROOT", Value: l.KubeletRoot()},
							{Name: "LOG_VERBOSITY", Value: "2"},
						},
						SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)},
						VolumeMounts:    mounts,
					}},
					Volumes: volumes,
				},
			},
		},
	}
}

// InstallMockGPU builds the mock GPU driver (a static binary of test/cluster/cmd/mockgpu),
// imports its image, applies the manifest for the sysfs tree sysRoot and waits for the
// plugin's rollout and the node's GPU ResourceSlice.
func (c *Cluster) InstallMockGPU(ctx context.Context, sysRoot string, timeout time.Duration) error {
	start := time.Now()
	l := c.Layout
	digest, err := c.importMockGPUImage(ctx)
	if err != nil {
		return err
	}
	manifest, err := l.mockGPUManifest(sysRoot, digest)
	if err != nil {
		return err
	}
	if err := c.apply(ctx, manifest); err != nil {
		return fmt.Errorf("apply the mock GPU driver: %w", err)
	}
	if _, err := c.kubectl(ctx, "-n", MockGPUNamespace, "rollout", "status", "daemonset/"+MockGPUDaemonSet,
		fmt.Sprintf("--timeout=%s", timeout)); err != nil {
		return fmt.Errorf("mock GPU plugin rollout: %w (logs: kubectl -n %s logs daemonset/%s)", err, MockGPUNamespace, MockGPUDaemonSet)
	}
	node, err := c.nodeName(ctx)
	if err != nil {
		return err
	}
	err = controlplane.WaitFor(ctx, "mock GPU ResourceSlice of node "+node, timeout, nil, func(ctx context.Context) error {
		out, err := c.kubectl(ctx, "get", "resourceslices", "-o", "name",
			"--field-selector", "spec.nodeName="+node+",spec.driver="+mockgpu.DriverName)
		if err == nil && strings.TrimSpace(out) == "" {
			err = errors.New("none published yet")
		}
		return err
	})
	if err != nil {
		return err
	}
	c.Log.Info("mock GPU driver installed", "sysRoot", sysRoot, "deviceClass", MockGPUDeviceClass, "took", time.Since(start).Round(time.Second).String())
	return nil
}

// importMockGPUImage builds the driver's static binary into Images(), wraps it in
// MockGPUImage, imports that and returns the image's digest.
func (c *Cluster) importMockGPUImage(ctx context.Context) (string, error) {
	l := c.Layout
	if err := os.MkdirAll(l.Images(), 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", l.Images(), err)
	}
	// Images() is absolute (NewLayout), as -o must be: the build runs in the test module.
	bin := filepath.Join(l.Images(), "mockgpu")
	cmd := exec.CommandContext(ctx, c.Bins.Go, "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, "./cluster/cmd/mockgpu")
	cmd.Dir = c.Bins.TestModule
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the mock GPU driver: %w: %s", err, strings.TrimSpace(string(out)))
	}
	img := mockGPUImage(bin)
	built, err := ociimage.Build(img)
	if err != nil {
		return "", err
	}
	digest, err := built.Digest()
	if err != nil {
		return "", fmt.Errorf("digest of %s: %w", img.Name, err)
	}
	archive := l.imageArchive(img.Name)
	if err := ociimage.WriteFile(archive, img.Name, built); err != nil {
		return "", fmt.Errorf("write image %s: %w", img.Name, err)
	}
	if err := ImportArchive(ctx, l, c.Bins, archive); err != nil {
		return "", err
	}
	return digest.String(), nil
}

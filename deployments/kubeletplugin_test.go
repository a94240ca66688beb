package deployments

import (
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/rdma-dra/rdma-dra-driver/internal/cliflags"
	"github.com/rdma-dra/rdma-dra-driver/pkg/health"
	"github.com/rdma-dra/rdma-dra-driver/pkg/plugin"
)

// binaryFlags are the flags of a binary built by cliflags.NewApp from flags, as the
// binary has them (its own and the logging flags).
func binaryFlags(name string, flags []cli.Flag) []cliflags.FlagInfo {
	return cliflags.Describe(cliflags.NewApp(name, "", flags).Flags)
}

// pluginChartOmits are the kubelet plugin's flags (by their environment twin) that the
// chart does not set in its default rendering, and why. Every other flag is set: a new
// flag fails TestKubeletPluginEnv until the chart sets it or it is listed here.
var pluginChartOmits = map[string]string{
	"KUBECONFIG":     "the pod's service account",
	"KUBE_API_QPS":   "the plugin's default, the kubelet's",
	"KUBE_API_BURST": "the plugin's default, the kubelet's",
	// docs/kubelet-plugin.md#claim-status
	"STATUS_API_QPS":        "the plugin's default",
	"STATUS_API_BURST":      "the plugin's default",
	"RESCAN_INTERVAL":       "the plugin's default",
	"CLEANUP_INTERVAL":      "the plugin's default",
	"HOOK_SOURCE":           "the hook next to the plugin in the image",
	"NETLINK":               "auto: on for the node's /sys, off for a mock node's tree",
	"BOOT_ID_PATH":          "the kernel's",
	"NODE_CONFIG":           "only with nodeConfig",
	"METRICS_SECURE":        "only with metrics.secure",
	"METRICS_TLS_CERT_FILE": "only with metrics.secure and metrics.tls.secretName",
	"METRICS_TLS_KEY_FILE":  "only with metrics.secure and metrics.tls.secretName",
}

// loggingOmits are the component-base logging flags both binaries have and the chart
// leaves at their defaults (it sets the verbosity and the format only).
var loggingOmits = map[string]string{
	"LOG_VMODULE":               "component-base's default",
	"FEATURE_GATES":             "component-base's default",
	"LOG_FLUSH_FREQUENCY":       "component-base's default",
	"LOG_TEXT_SPLIT_STREAM":     "component-base's default",
	"LOG_TEXT_INFO_BUFFER_SIZE": "component-base's default",
	"LOG_JSON_SPLIT_STREAM":     "component-base's default",
	"LOG_JSON_INFO_BUFFER_SIZE": "component-base's default",
}

// checkChartEnv compares the variables a container of the chart sets with the flags of
// its binary: each variable is the first environment twin of a flag (not an alias, not
// a name no flag reads), and every flag is set unless componentOmits or loggingOmits
// says why not.
func checkChartEnv(t *testing.T, c corev1.Container, flags []cliflags.FlagInfo, componentOmits map[string]string) {
	t.Helper()
	primary := sets.New[string]()
	read := sets.New[string]()
	for _, f := range flags {
		if len(f.EnvVars) == 0 {
			t.Errorf("flag --%s has no environment twin", f.Name)
			continue
		}
		primary.Insert(f.EnvVars[0])
		read.Insert(f.EnvVars...)
	}
	set := sets.New[string]()
	for _, e := range c.Env {
		if set.Has(e.Name) {
			t.Errorf("env %s set twice", e.Name)
		}
		set.Insert(e.Name)
		switch {
		case !read.Has(e.Name):
			t.Errorf("the chart sets %s but no flag of %s reads it", e.Name, c.Name)
		case !primary.Has(e.Name):
			t.Errorf("the chart sets %s, which is not the first environment twin of its flag", e.Name)
		}
	}
	omits := maps.Clone(componentOmits)
	maps.Copy(omits, loggingOmits)
	for name, why := range omits {
		if !primary.Has(name) {
			t.Errorf("%s is listed as left out (%s) but is no flag's environment twin", name, why)
		}
		if set.Has(name) {
			t.Errorf("%s is listed as left out (%s) but the chart sets it", name, why)
		}
	}
	for _, name := range sets.List(primary) {
		if _, omitted := omits[name]; !omitted && !set.Has(name) {
			t.Errorf("the chart does not set %s: set it or say why not in the list of flags the chart leaves out", name)
		}
	}
}

func pluginContainer(t *testing.T, ds *appsv1.DaemonSet) corev1.Container {
	t.Helper()
	if n := len(ds.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("DaemonSet %s: want 1 container, got %d", ds.Name, n)
	}
	return ds.Spec.Template.Spec.Containers[0]
}

func TestKubeletPluginDaemonSet(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			ds := one[*appsv1.DaemonSet](t, objs)
			pod := ds.Spec.Template.Spec
			c := pluginContainer(t, ds)

			checks := []struct {
				what string
				ok   bool
			}{
				{"hostNetwork", pod.HostNetwork},
				{"dnsPolicy ClusterFirstWithHostNet", pod.DNSPolicy == corev1.DNSClusterFirstWithHostNet},
				{"priorityClassName system-node-critical", pod.PriorityClassName == "system-node-critical"},
				{"no hostPID/hostIPC", !pod.HostPID && !pod.HostIPC},
				{"RollingUpdate", ds.Spec.UpdateStrategy.Type == appsv1.RollingUpdateDaemonSetStrategyType},
				{"maxSurge 1", ds.Spec.UpdateStrategy.RollingUpdate != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge != nil &&
					ds.Spec.UpdateStrategy.RollingUpdate.MaxSurge.IntValue() == 1},
				{"maxUnavailable 0", ds.Spec.UpdateStrategy.RollingUpdate != nil && ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable != nil &&
					ds.Spec.UpdateStrategy.RollingUpdate.MaxUnavailable.IntValue() == 0},
				{"command is the kubelet plugin", slices.Equal(c.Command, []string{"/usr/bin/rdma-dra-kubeletplugin"})},
				{"HTTP liveness probe on 127.0.0.1:HEALTHCHECK_PORT/healthz, where the port is bound",
					c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/healthz" &&
						c.LivenessProbe.HTTPGet.Port.String() == envValue(c, "HEALTHCHECK_PORT") &&
						c.LivenessProbe.HTTPGet.Host == "127.0.0.1" && envValue(c, "HEALTHCHECK_BIND_ADDRESS") == "127.0.0.1"},
				// An HTTP readiness probe could be answered by the other instance of a
				// rolling update (both serve the health port): the probe runs in the container.
				{"readiness probe: the plugin's ready command in the container, reading READY_FILE on a writable emptyDir (the root file system is read-only)",
					c.ReadinessProbe != nil && c.ReadinessProbe.Exec != nil &&
						slices.Equal(c.ReadinessProbe.Exec.Command, []string{"/usr/bin/rdma-dra-kubeletplugin", "ready"}) &&
						onWritableEmptyDir(pod, c, envValue(c, "READY_FILE"))},
				{"metrics bound to 127.0.0.1 by default", envValue(c, "METRICS_BIND_ADDRESS") == "127.0.0.1:9472"},
				{"selector matches template labels", ds.Spec.Selector != nil && isSubset(ds.Spec.Selector.MatchLabels, ds.Spec.Template.Labels)},
			}
			for _, ck := range checks {
				if !ck.ok {
					t.Errorf("DaemonSet %s: want %s", ds.Name, ck.what)
				}
			}

			// POD_UID enables the rolling update with surge: two plugin pods on a node
			// register under different sockets. NODE_IPS takes every node IP of a
			// dual-stack node (status.hostIP is the first one only): the plugin never hands
			// a pod, nor takes away from the host, an address of the other family either.
			for name, path := range map[string]string{"NODE_NAME": "spec.nodeName", "POD_UID": "metadata.uid", "NODE_IPS": "status.hostIPs"} {
				if got := envFieldPath(c, name); got != path {
					t.Errorf("env %s: want fieldRef %s, got %q", name, path, got)
				}
			}
		})
	}
}

func TestKubeletPluginSecurityContext(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ds := one[*appsv1.DaemonSet](t, decodeFile(t, file))
			for _, c := range append(ds.Spec.Template.Spec.InitContainers, ds.Spec.Template.Spec.Containers...) {
				sc := c.SecurityContext
				if sc == nil {
					t.Fatalf("container %s: no securityContext", c.Name)
				}
				checks := []struct {
					what string
					ok   bool
				}{
					{"not privileged", sc.Privileged == nil || !*sc.Privileged},
					{"allowPrivilegeEscalation false", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation},
					{"readOnlyRootFilesystem", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem},
					{"drops ALL capabilities", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"})},
					// Network attachment (on by default) changes links in the pods'
					// network namespaces, which it enters with setns: those two only.
					{"adds only NET_ADMIN and SYS_ADMIN", sc.Capabilities == nil || slices.Equal(sc.Capabilities.Add, []corev1.Capability{"NET_ADMIN", "SYS_ADMIN"})},
					{"seccomp RuntimeDefault", sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
					{"no procMount Unmasked", sc.ProcMount == nil || *sc.ProcMount == corev1.DefaultProcMount},
				}
				for _, ck := range checks {
					if !ck.ok {
						t.Errorf("container %s: want %s", c.Name, ck.what)
					}
				}
			}
		})
	}
}

// TestKubeletPluginMounts checks that every host path the plugin is told about is mounted
// at the same path (so the paths it writes into CDI specs are valid on the host) and that
// it can write only where it must.
func TestKubeletPluginMounts(t *testing.T) {
	wantWritable := []string{"CDI_ROOT", "KUBELET_REGISTRAR_DIRECTORY_PATH", "HOOK_INSTALL_DIR"}
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			ds := one[*appsv1.DaemonSet](t, decodeFile(t, file))
			c := pluginContainer(t, ds)
			hostPaths := map[string]string{} // volume name -> host path
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil {
					hostPaths[v.Name] = v.HostPath.Path
				}
			}
			mounts := map[string]corev1.VolumeMount{} // container path -> mount
			for _, m := range c.VolumeMounts {
				if hp, ok := hostPaths[m.Name]; ok && hp != m.MountPath {
					t.Errorf("volume %s: host path %s mounted at %s, want the same path", m.Name, hp, m.MountPath)
				}
				mounts[m.MountPath] = m
			}
			mountOf := func(path string) (corev1.VolumeMount, bool) {
				for p := path; p != "/" && p != "."; p = filepath.Dir(p) {
					if m, ok := mounts[p]; ok {
						return m, true
					}
				}
				return corev1.VolumeMount{}, false
			}

			for _, env := range wantWritable {
				m, ok := mountOf(envValue(c, env))
				if !ok || m.ReadOnly {
					t.Errorf("%s=%s: want a writable host mount, got %+v", env, envValue(c, env), m)
				}
			}
			// The plugin's own directory below KUBELET_PLUGINS_DIRECTORY_PATH, not the
			// other plugins'.
			own := filepath.Join(envValue(c, "KUBELET_PLUGINS_DIRECTORY_PATH"), envValue(c, "DRIVER_NAME"))
			if m, ok := mounts[own]; !ok || m.ReadOnly {
				t.Errorf("want %s mounted writable, got %+v", own, m)
			}
			if _, ok := mounts[envValue(c, "KUBELET_PLUGINS_DIRECTORY_PATH")]; ok {
				t.Errorf("the whole plugins directory is mounted; want only %s", own)
			}
			// The device metadata files: the driver's own directory below
			// DEVICE_METADATA_ROOT, on the host's tmpfs.
			metaDir := filepath.Join(envValue(c, "DEVICE_METADATA_ROOT"), envValue(c, "DRIVER_NAME"))
			if m, ok := mounts[metaDir]; !ok || m.ReadOnly {
				t.Errorf("want %s mounted writable, got %+v", metaDir, m)
			}
			if _, ok := mounts[envValue(c, "DEVICE_METADATA_ROOT")]; ok {
				t.Errorf("the whole device metadata root is mounted; want only %s", metaDir)
			}
			for _, env := range []string{"SYSFS_ROOT", "DEV_ROOT"} {
				if env == "SYSFS_ROOT" && envValue(c, "RDMA_KERNEL") == "emulated" {
					// The emulated RDMA kernel of a mock node writes GID entries into
					// the mock tree, as the kernel would (docs/network-attachment.md).
					continue
				}
				path := envValue(c, env)
				if env == "DEV_ROOT" {
					path = filepath.Join(path, "infiniband")
				}
				m, ok := mountOf(path)
				if !ok || !m.ReadOnly {
					t.Errorf("%s: want %s on a read-only host mount, got %+v", env, path, m)
				}
			}
			for _, v := range ds.Spec.Template.Spec.Volumes {
				if v.HostPath != nil && (v.HostPath.Path == "/" || v.HostPath.Path == "/dev" || v.HostPath.Path == "/var/lib/kubelet") {
					t.Errorf("volume %s mounts all of %s", v.Name, v.HostPath.Path)
				}
			}
		})
	}
}

// TestKubeletPluginEnv checks the chart's variables against the plugin's declared flags
// (plugin.Flags), and the values of those that have defaults in the plugin.
func TestKubeletPluginEnv(t *testing.T) {
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			c := pluginContainer(t, one[*appsv1.DaemonSet](t, decodeFile(t, file)))
			checkChartEnv(t, c, binaryFlags(plugin.Component, plugin.Flags(&plugin.Config{})), pluginChartOmits)
			wantValues := map[string]string{"DRIVER_NAME": "rdma.dra.io", "CDI_ROOT": "/var/run/cdi", "DEVICE_MODEL": "auto",
				// The chart's health values default to the plugin's own defaults.
				"HEALTH_POLL_INTERVAL": health.DefaultPollInterval.String(), "TAINT_EFFECT": string(resourceapi.DeviceTaintEffectNoSchedule),
				"MAX_REPUBLISH_PER_MINUTE": strconv.Itoa(health.DefaultMaxRepublishPerMinute), "NODE_EVENTS": "true",
				// Device metadata is on by default (docs/device-metadata.md).
				"DEVICE_METADATA": "true", "DEVICE_METADATA_ROOT": plugin.DefaultDeviceMetadataRoot}
			if strings.Contains(file, "mock") {
				wantValues["SYSFS_ROOT"] = "/var/lib/rdma-dra/mock/sys"
				wantValues["DEV_ROOT"] = "/var/lib/rdma-dra/mock/dev"
			} else {
				wantValues["SYSFS_ROOT"] = "/sys"
				wantValues["DEV_ROOT"] = "/dev"
			}
			for name, want := range wantValues {
				if got := envValue(c, name); got != want {
					t.Errorf("env %s=%q, want %q", name, got, want)
				}
			}
		})
	}
}

// TestRBACLeastPrivilege checks the plugin's ClusterRole rule by rule against what its
// code calls (pkg/plugin, the kubeletplugin and resourceslice libraries): no wildcards, no
// verb more, and each needed permission present.
func TestRBACLeastPrivilege(t *testing.T) {
	want := map[string]sets.Set[string]{ // group/resource -> verbs
		"/nodes":                         sets.New("get"),
		"resource.k8s.io/resourceslices": sets.New("get", "list", "watch", "create", "update", "delete"),
		"resource.k8s.io/resourceclaims": sets.New("get", "list"),
		// Node events are granted in the default namespace only (TestPluginEventsRole).
		// status.devices is written with server-side apply (a patch); the synthetic
		// resourceclaims/driver check must be limited to this driver's name and to
		// claims on the plugin's own node (associated-node, never arbitrary-node).
		"resource.k8s.io/resourceclaims/status": sets.New("patch"),
		"resource.k8s.io/resourceclaims/driver": sets.New("associated-node:patch"),
	}
	for _, file := range staticFiles {
		t.Run(filepath.Base(file), func(t *testing.T) {
			objs := decodeFile(t, file)
			got := map[string]sets.Set[string]{}
			for _, role := range only[*rbacv1.ClusterRole](objs) {
				if !strings.HasSuffix(role.Name, "-kubelet-plugin") {
					continue // the controller's, checked in controller_test.go
				}
				if role.AggregationRule != nil {
					t.Errorf("ClusterRole %s aggregates other roles", role.Name)
				}
				for i, r := range role.Rules {
					if len(r.NonResourceURLs) > 0 {
						t.Errorf("rule %d: non-resource URLs %v", i, r.NonResourceURLs)
					}
					for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
						if slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, "*") }) {
							t.Errorf("rule %d: wildcard in %v", i, list)
						}
					}
					for _, g := range r.APIGroups {
						for _, res := range r.Resources {
							key := g + "/" + res
							if got[key] == nil {
								got[key] = sets.New[string]()
							}
							got[key].Insert(r.Verbs...)
							wantNames := []string(nil)
							if res == "resourceclaims/driver" {
								wantNames = []string{"rdma.dra.io"}
							}
							if !slices.Equal(r.ResourceNames, wantNames) {
								t.Errorf("rule %d: %s resourceNames %v, want %v", i, key, r.ResourceNames, wantNames)
							}
						}
					}
				}
			}
			for key, verbs := range got {
				if extra := verbs.Difference(want[key]); extra.Len() > 0 {
					t.Errorf("%s: verbs %v are not needed", key, sets.List(extra))
				}
			}
			for key, verbs := range want {
				if missing := verbs.Difference(got[key]); missing.Len() > 0 {
					t.Errorf("%s: verbs %v are missing", key, sets.List(missing))
				}
			}
			sa := pluginServiceAccount(t, objs)
			want := rbacv1.Subject{Kind: "ServiceAccount", Name: sa.Name, Namespace: sa.Namespace}
			found := false
			for _, binding := range only[*rbacv1.ClusterRoleBinding](objs) {
				if binding.RoleRef.Name != sa.Name {
					continue
				}
				found = true
				if !slices.Equal(binding.Subjects, []rbacv1.Subject{want}) {
					t.Errorf("ClusterRoleBinding subjects %v, want only %v", binding.Subjects, want)
				}
			}
			if !found {
				t.Errorf("no ClusterRoleBinding of role %s", sa.Name)
			}
		})
	}
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func envFieldPath(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			return e.ValueFrom.FieldRef.FieldPath
		}
	}
	return ""
}

func isSubset(sub, super map[string]string) bool {
	for k, v := range sub {
		if super[k] != v {
			return false
		}
	}
	return len(sub) > 0
}

// pluginServiceAccount is the ServiceAccount the kubelet plugin's DaemonSet runs as.
func pluginServiceAccount(t *testing.T, objs []object) *corev1.ServiceAccount {
	t.Helper()
	ds := one[*appsv1.DaemonSet](t, objs)
	for _, sa := range only[*corev1.ServiceAccount](objs) {
		if sa.Name == ds.Spec.Template.Spec.ServiceAccountName {
			return sa
		}
	}
	t.Fatalf("DaemonSet runs as %q, which the manifests do not create", ds.Spec.Template.Spec.ServiceAccountName)
	return nil
}

// onWritableEmptyDir reports whether path lies on a writable mount of an emptyDir volume
// of the container.
func onWritableEmptyDir(pod corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.ReadOnly || !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

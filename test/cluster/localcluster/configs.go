package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
)

// Options are what a user can choose for cluster-up.
type Options struct {
	// FeatureGates is passed to every component ("A=true,B=false"). Every DRA gate this
	// driver uses is on by default in Kubernetes 1.37, so it is empty by default.
	FeatureGates string
	// RuntimeConfig is kube-apiserver's --runtime-config.
	RuntimeConfig string
	// Fixture is a node tree (with sys/ and dev/) exposed at MockRoot; empty means the
	// default mock-node profile written into the output directory.
	Fixture string
	// MockProfile is the profile of `rdma-dra mock-node` used when Fixture is empty.
	MockProfile string
	// SkipSmoke leaves out the smoke test at the end of Up.
	SkipSmoke bool
	// Verbosity is the klog -v of every component.
	Verbosity int
}

// DefaultRuntimeConfig serves resource.k8s.io v1 (on by default) and also the beta versions,
// so that clients built against older APIs keep working; no alpha version is needed.
const DefaultRuntimeConfig = "resource.k8s.io/v1beta1=true,resource.k8s.io/v1beta2=true"

// featureGateMap parses "A=true,B=false".
func featureGateMap(s string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, kv := range strings.Split(s, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || (v != "true" && v != "false") {
			return nil, fmt.Errorf("feature gate %q is not NAME=true|false", kv)
		}
		out[k] = v == "true"
	}
	return out, nil
}

func containerdConfig(l Layout, f *host.Facts, runcBinary string) string {
	return fmt.Sprintf(`# Written by the rdma-dra-driver local cluster; regenerated on every cluster-up.
version = 3
root = %q
state = %q
oom_score = 0

[grpc]
  address = %q

[ttrpc]
  address = %q

[debug]
  level = "info"

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %q

[plugins."io.containerd.cri.v1.runtime"]
  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = %q
        Root = %q
        SystemdCgroup = %t
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %q

[plugins."io.containerd.nri.v1.nri"]
  disable = false
  socket_path = %q
  plugin_path = %q
  plugin_config_path = %q
`, l.ContainerdRoot(), l.ContainerdState(), l.ContainerdSocket(), l.ContainerdSocket()+".ttrpc",
		filepath.Join(StateRoot, "opt"), PauseImage, runcBinary, filepath.Join(RunRoot, "runc"), f.CgroupDriver == "systemd", l.CNIConfDir(),
		l.NRISocket(), filepath.Join(l.NRIDir(), "plugins"), filepath.Join(l.NRIDir(), "conf.d"))
}

// cniConfig is a bridge network with host-local addresses, masquerading, port mapping.
func cniConfig(l Layout, mtu int) string {
	if mtu <= 0 {
		mtu = 1500
	}
	return fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "rdma-dra-local",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "mtu": %d,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, BridgeName, mtu, l.CNIDataDir(), PodSubnet)
}

func kubeletConfig(l Layout, f *host.Facts, gates map[string]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: %s
failSwapOn: false
failCgroupV1: false
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization:
  mode: Webhook
tlsCertFile: %s
tlsPrivateKeyFile: %s
serverTLSBootstrap: false
rotateCertificates: false
readOnlyPort: 0
clusterDomain: cluster.local
resolvConf: %s
podLogsDir: %s
staticPodPath: ""
hairpinMode: hairpin-veth
# A busy development disk must not evict the cluster's pods or its images.
evictionHard:
  memory.available: "50Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, l.ContainerdSocket(), f.CgroupDriver, l.pkiFile("ca.crt"), l.pkiFile("kubelet-serving.crt"),
		l.pkiFile("kubelet-serving.key"), f.ResolvConf, l.PodLogs())
	if f.OOMScoreAdjLocked {
		b.WriteString("# This host refuses to lower oom_score_adj.\noomScoreAdj: 0\n")
	}
	writeGates(&b, gates)
	return b.String()
}

func kubeProxyConfig(l Layout, f *host.Facts, gates map[string]bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clusterCIDR: %s
hostnameOverride: %s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
clientConnection:
  kubeconfig: %s
# Leave the host's conntrack settings alone.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, ClusterCIDR, f.NodeName, l.componentKubeconfig("kube-proxy"))
	if f.OOMScoreAdjLocked {
		b.WriteString("oomScoreAdj: 0\n")
	}
	writeGates(&b, gates)
	return b.String()
}

func writeGates(b *strings.Builder, gates map[string]bool) {
	if len(gates) == 0 {
		return
	}
	names := make([]string, 0, len(gates))
	for k := range gates {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteString("featureGates:\n")
	for _, k := range names {
		fmt.Fprintf(b, "  %s: %t\n", k, gates[k])
	}
}

// writeConfigs renders every configuration file of the cluster.
func writeConfigs(l Layout, f *host.Facts, gates map[string]bool, runcBinary string) error {
	files := map[string]string{
		l.containerdConfigFile():                                    containerdConfig(l, f, runcBinary),
		filepath.Join(l.CNIConfDir(), "10-rdma-dra-local.conflist"): cniConfig(l, f.MTU),
		l.kubeletConfigFile():                                       kubeletConfig(l, f, gates),
		l.kubeProxyConfigFile():                                     kubeProxyConfig(l, f, gates),
	}
	for p, content := range files {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

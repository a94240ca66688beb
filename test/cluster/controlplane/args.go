package controlplane

import (
	"path/filepath"
	"strconv"
	"strings"
)

// ServiceCIDR is the service cluster IP range of every control plane started from these
// command lines; the kubernetes service gets its first address.
const ServiceCIDR = "10.96.0.0/16"

// ServiceAccountIssuer is the issuer of service-account tokens: the API server's
// in-cluster name, as kubeadm sets it.
const ServiceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// The files of a PKI directory the API server reads, as the local cluster and the
// harness write them with package pki: the CA (CA.Write(dir, "ca")), the serving
// certificate (a Leaf named "apiserver") and the service-account keys
// (WriteServiceAccountKeys).
const (
	caCertFile        = "ca.crt"
	apiServerCertFile = "apiserver.crt"
	apiServerKeyFile  = "apiserver.key"
	saPublicKeyFile   = "sa.pub"
	saSigningKeyFile  = "sa.key"
)

// EtcdSpec is what differs between the etcd members started here.
type EtcdSpec struct {
	// Name is the member's name, also its entry in the initial cluster.
	Name string
	// DataDir holds the member's data.
	DataDir string
	// ClientURL and PeerURL (http://host:port) are where it listens for clients and
	// peers; it advertises the same URLs.
	ClientURL, PeerURL string
}

// EtcdArgs is etcd's command line, without the program, for a cluster of one member
// that serves metrics on its client URL only and logs warnings and errors.
func EtcdArgs(s EtcdSpec) []string {
	return []string{
		"--name=" + s.Name, "--data-dir=" + s.DataDir,
		"--listen-client-urls=" + s.ClientURL, "--advertise-client-urls=" + s.ClientURL,
		"--listen-peer-urls=" + s.PeerURL, "--initial-advertise-peer-urls=" + s.PeerURL,
		"--initial-cluster=" + s.Name + "=" + s.PeerURL,
		// Empty: no second listener for metrics.
		"--listen-metrics-urls=",
		"--log-level=warn",
	}
}

// APIServerSpec is what differs between the API servers started here.
type APIServerSpec struct {
	// EtcdURL is etcd's client URL.
	EtcdURL string
	// BindAddress is the address it listens on, AdvertiseAddress the one it gives to
	// the cluster as its own.
	BindAddress, AdvertiseAddress string
	// SecurePort is its HTTPS port.
	SecurePort int
	// PKIDir holds ca.crt (the client CA), apiserver.crt and apiserver.key (the serving
	// pair) and sa.pub and sa.key (the service-account token keys).
	PKIDir string
	// FeatureGates is --feature-gates ("A=true,B=false"); empty leaves the flag out.
	FeatureGates string
}

// APIServerArgs is kube-apiserver's command line, without the program: etcd, serving and
// client authentication with the PKI of s.PKIDir, Node and RBAC authorization,
// service-account tokens, ServiceCIDR, no profiling endpoints, and the feature gates.
func APIServerArgs(s APIServerSpec) []string {
	pki := func(name string) string { return filepath.Join(s.PKIDir, name) }
	args := []string{
		"--etcd-servers=" + s.EtcdURL,
		"--bind-address=" + s.BindAddress, "--advertise-address=" + s.AdvertiseAddress,
		"--secure-port=" + strconv.Itoa(s.SecurePort),
		"--client-ca-file=" + pki(caCertFile),
		"--tls-cert-file=" + pki(apiServerCertFile), "--tls-private-key-file=" + pki(apiServerKeyFile),
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + ServiceAccountIssuer,
		"--service-account-key-file=" + pki(saPublicKeyFile),
		"--service-account-signing-key-file=" + pki(saSigningKeyFile),
		"--service-cluster-ip-range=" + ServiceCIDR,
		"--profiling=false",
	}
	return append(args, featureGates(s.FeatureGates)...)
}

// ComponentSpec is what kube-scheduler and kube-controller-manager share: how they reach
// the API server and how they serve health, metrics and profiles.
type ComponentSpec struct {
	// Kubeconfig is the API server's kubeconfig, also the one the component delegates
	// authentication and authorization of its own endpoints to.
	Kubeconfig string
	// SecurePort is its loopback HTTPS port; 0 keeps the program's default (10259 for
	// the scheduler, 10257 for the controller manager).
	SecurePort int
	// AlwaysAllowPaths are served without authorization, to a client without a
	// certificate; empty leaves the flag out.
	AlwaysAllowPaths []string
	// FeatureGates is --feature-gates ("A=true,B=false"); empty leaves the flag out.
	FeatureGates string
}

// args are the flags of s: delegated authentication and authorization, serving on
// loopback only, no leader election (every control plane here runs one of each), the
// port, the open paths and the feature gates.
func (s ComponentSpec) args() []string {
	args := []string{
		"--authentication-kubeconfig=" + s.Kubeconfig, "--authorization-kubeconfig=" + s.Kubeconfig,
		"--bind-address=127.0.0.1", "--leader-elect=false",
	}
	if s.SecurePort != 0 {
		args = append(args, "--secure-port="+strconv.Itoa(s.SecurePort))
	}
	if len(s.AlwaysAllowPaths) > 0 {
		args = append(args, "--authorization-always-allow-paths="+strings.Join(s.AlwaysAllowPaths, ","))
	}
	return append(args, featureGates(s.FeatureGates)...)
}

// SchedulerSpec is what differs between the schedulers started here.
type SchedulerSpec struct {
	ComponentSpec
	// ConfigFile is a KubeSchedulerConfiguration. When set, it holds the client
	// connection (the scheduler ignores --kubeconfig then); when empty, the scheduler
	// reaches the API server with Kubeconfig and runs the default configuration.
	ConfigFile string
}

// SchedulerArgs is kube-scheduler's command line, without the program.
func SchedulerArgs(s SchedulerSpec) []string {
	args := []string{"--kubeconfig=" + s.Kubeconfig}
	if s.ConfigFile != "" {
		args = []string{"--config=" + s.ConfigFile}
	}
	return append(args, s.ComponentSpec.args()...)
}

// ClientLimits are the client-side rate limits of a component towards the API server.
type ClientLimits struct {
	QPS, Burst int
}

// ControllerManagerSpec is what differs between the controller managers started here.
type ControllerManagerSpec struct {
	ComponentSpec
	// Controllers are the controllers it runs, as --controllers takes them ("*" is
	// every controller on by default, "-name" turns one off); empty leaves the flag out.
	Controllers []string
	// Limits are its client limits; a zero field keeps the program's default.
	Limits ClientLimits
}

// ControllerManagerArgs is kube-controller-manager's command line, without the program.
func ControllerManagerArgs(s ControllerManagerSpec) []string {
	args := []string{"--kubeconfig=" + s.Kubeconfig}
	if len(s.Controllers) > 0 {
		args = append(args, "--controllers="+strings.Join(s.Controllers, ","))
	}
	if s.Limits.QPS != 0 {
		args = append(args, "--kube-api-qps="+strconv.Itoa(s.Limits.QPS))
	}
	if s.Limits.Burst != 0 {
		args = append(args, "--kube-api-burst="+strconv.Itoa(s.Limits.Burst))
	}
	return append(args, s.ComponentSpec.args()...)
}

// featureGates is --feature-gates=gates, or nothing when gates is empty.
func featureGates(gates string) []string {
	if gates == "" {
		return nil
	}
	return []string{"--feature-gates=" + gates}
}

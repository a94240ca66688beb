package controlplane

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/bincache"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/pki"
)

// Binaries are the control-plane programs the harness runs.
type Binaries struct {
	Etcd, APIServer, Scheduler, ControllerManager string
}

// CachedBinaries finds etcd and the Kubernetes control-plane programs in the local cluster's binary cache
// (_output/cluster-cache, filled by `make cluster-build`) at the versions the test module
// pins. It does not build: the make target does that once, through the cluster tool.
func CachedBinaries(ctx context.Context, repo string) (Binaries, error) {
	cache, err := bincache.New(ctx, filepath.Join(repo, "_output", "cluster-cache"), filepath.Join(repo, "test"), GoCommand(),
		"unused", "", slog.New(slog.DiscardHandler))
	if err != nil {
		return Binaries{}, fmt.Errorf("resolve the binary cache: %w", err)
	}
	b := Binaries{
		Etcd: cache.Etcd.Path("etcd"), APIServer: cache.Kubernetes.Path("kube-apiserver"),
		Scheduler: cache.Kubernetes.Path("kube-scheduler"), ControllerManager: cache.Kubernetes.Path("kube-controller-manager"),
	}
	for _, p := range []string{b.Etcd, b.APIServer, b.Scheduler, b.ControllerManager} {
		if _, err := os.Stat(p); err != nil {
			return b, fmt.Errorf("%s is missing; run `make cluster-build` first: %w", p, err)
		}
	}
	return b, nil
}

// GoCommand is the go command: $GO, go on PATH, or the toolchain under /usr/local/go.
func GoCommand() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

// ControlPlane is etcd and kube-apiserver on loopback ports, with a CA of their own and an
// admin client certificate (system:masters).
type ControlPlane struct {
	// Kubeconfig is the admin's kubeconfig file.
	Kubeconfig string
	Config     *rest.Config
	Client     kubernetes.Interface
	// PKIDir holds the CA and the admin's client certificate.
	PKIDir string
	procs  []*Process
	bins   Binaries
}

// FeatureGates are the DRA gates the default device model needs; all are on by
// default in 1.37, set here so that the run does not depend on that.
const FeatureGates = "DRAPartitionableDevices=true,DRAConsumableCapacity=true,DRADeviceTaints=true"

// Start starts etcd (data on disk below dir) and kube-apiserver, and waits
// until the API server is ready. Logs go to logDir.
func Start(ctx context.Context, bins Binaries, dir, logDir string) (_ *ControlPlane, err error) {
	logger := klog.FromContext(ctx)
	cp := &ControlPlane{bins: bins}
	defer func() {
		if err != nil {
			cp.Stop(ctx)
		}
	}()
	pkiDir := filepath.Join(dir, "pki")
	cp.PKIDir = pkiDir
	if err := writePKI(pkiDir); err != nil {
		return nil, err
	}
	ports, err := FreePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	etcd, err := StartProcess(ctx, "etcd", filepath.Join(logDir, "etcd.log"), bins.Etcd,
		EtcdArgs(EtcdSpec{Name: "bench", DataDir: filepath.Join(dir, "etcd"), ClientURL: etcdURL, PeerURL: peerURL})...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, etcd)
	if err := etcd.waitReady(ctx, 60*time.Second, HTTPCheck(&http.Client{Timeout: 2 * time.Second}, etcdURL+"/health", "")); err != nil {
		return nil, err
	}
	apiURL := "https://127.0.0.1:" + strconv.Itoa(ports[2])
	apiArgs := append(APIServerArgs(APIServerSpec{
		EtcdURL: etcdURL, BindAddress: "127.0.0.1", AdvertiseAddress: "127.0.0.1", SecurePort: ports[2],
		PKIDir: pkiDir, FeatureGates: FeatureGates,
	}),
		// A loopback advertise address needs the kubernetes service endpoints left alone.
		"--endpoint-reconciler-type=none")
	api, err := StartProcess(ctx, "kube-apiserver", filepath.Join(logDir, "kube-apiserver.log"), bins.APIServer, apiArgs...)
	if err != nil {
		return nil, err
	}
	cp.procs = append(cp.procs, api)
	cp.Kubeconfig = filepath.Join(dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.Kubeconfig, apiURL, pkiDir); err != nil {
		return nil, err
	}
	if cp.Config, err = clientcmd.BuildConfigFromFlags("", cp.Kubeconfig); err != nil {
		return nil, fmt.Errorf("load admin kubeconfig: %w", err)
	}
	// The harness itself issues many concurrent requests; the client's default rate
	// limit (5 QPS) would measure itself.
	cp.Config.QPS, cp.Config.Burst = 1000, 2000
	if cp.Client, err = kubernetes.NewForConfig(cp.Config); err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	tlsCfg, err := rest.TLSConfigFor(cp.Config)
	if err != nil {
		return nil, fmt.Errorf("admin TLS config: %w", err)
	}
	admin := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	if err := api.waitReady(ctx, 120*time.Second, HTTPCheck(admin, apiURL+"/readyz", "")); err != nil {
		return nil, err
	}
	logger.Info("Control plane is ready", "apiServer", apiURL, "etcd", etcdURL)
	return cp, nil
}

// Pids are the process IDs of the running programs by name.
func (cp *ControlPlane) Pids() map[string]int {
	out := map[string]int{}
	for _, p := range cp.procs {
		if !p.Exited() {
			out[p.name] = p.Pid()
		}
	}
	return out
}

// Stop stops the processes in reverse order.
func (cp *ControlPlane) Stop(ctx context.Context) {
	for i := len(cp.procs) - 1; i >= 0; i-- {
		cp.procs[i].Stop(ctx, 15*time.Second)
	}
	cp.procs = nil
}

func writePKI(dir string) error {
	now := time.Now()
	ca, err := pki.NewCA("rdma-dra-bench-ca")
	if err != nil {
		return err
	}
	if err := ca.Write(dir, "ca"); err != nil {
		return err
	}
	leaves := []pki.Leaf{
		{Name: "apiserver", CommonName: "kube-apiserver", Server: true, DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}},
		{Name: "admin", CommonName: "bench-admin", Organization: []string{"system:masters"}, Client: true},
	}
	for _, l := range leaves {
		if err := ca.Issue(dir, l, now); err != nil {
			return err
		}
	}
	return pki.WriteServiceAccountKeys(dir)
}

// writeKubeconfig writes a kubeconfig that references the PKI files.
func writeKubeconfig(path, server, pkiDir string) error {
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster: {server: %q, certificate-authority: %q}
users:
- name: admin
  user: {client-certificate: %q, client-key: %q}
contexts:
- name: bench
  context: {cluster: bench, user: admin}
current-context: bench
`, server, filepath.Join(pkiDir, "ca.crt"), filepath.Join(pkiDir, "admin.crt"), filepath.Join(pkiDir, "admin.key"))
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		return fmt.Errorf("write kubeconfig: %w", err)
	}
	return nil
}

// FreePorts returns n loopback TCP ports that were free a moment ago.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

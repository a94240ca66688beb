package localcluster

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/rdma-dra/rdma-dra-driver/test/cluster/host"
	"github.com/rdma-dra/rdma-dra-driver/test/cluster/pki"
)

// identity is a client of the API server with its own certificate and kubeconfig.
type identity struct {
	name  string // file stem of the certificate and kubeconfig
	cn    string
	orgs  []string
	extra bool // also copied to <Out>/kubeconfig (the admin)
}

func identities(node string) []identity {
	return []identity{
		{name: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}, extra: true},
		{name: "kube-controller-manager", cn: "system:kube-controller-manager"},
		{name: "kube-scheduler", cn: "system:kube-scheduler"},
		{name: "kube-proxy", cn: "system:kube-proxy"},
		{name: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}},
	}
}

// writePKI creates the CA, the serving certificates of the API server and the kubelet, the
// client certificates and kubeconfigs of every component and the service-account keys.
func writePKI(l Layout, f *host.Facts) error {
	now := time.Now()
	dir := l.PKI()
	ca, err := pki.NewCA("rdma-dra-local-ca")
	if err != nil {
		return err
	}
	if err := ca.Write(dir, "ca"); err != nil {
		return err
	}
	leaves := []pki.Leaf{
		{
			Name: "apiserver", CommonName: "kube-apiserver", Server: true,
			DNSNames: []string{"localhost", f.NodeName, "kubernetes", "kubernetes.default",
				"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			IPs: []net.IP{net.IPv4(127, 0, 0, 1), f.NodeIP, ServiceIP},
		},
		{Name: "apiserver-kubelet-client", CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
		{Name: "kubelet-serving", CommonName: f.NodeName, Server: true,
			DNSNames: []string{"localhost", f.NodeName}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), f.NodeIP}},
	}
	for _, id := range identities(f.NodeName) {
		leaves = append(leaves, pki.Leaf{Name: id.name, CommonName: id.cn, Organization: id.orgs, Client: true})
	}
	for _, leaf := range leaves {
		if err := ca.Issue(dir, leaf, now); err != nil {
			return err
		}
	}
	if err := pki.WriteServiceAccountKeys(dir); err != nil {
		return err
	}
	return writeKubeconfigs(l, f)
}

// writeKubeconfigs writes one kubeconfig per identity into Kubeconfigs() and the admin's
// also to Kubeconfig(), all with embedded certificates so they can be copied elsewhere.
func writeKubeconfigs(l Layout, f *host.Facts) error {
	if err := os.MkdirAll(l.Kubeconfigs(), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", l.Kubeconfigs(), err)
	}
	read := func(name string) (string, error) {
		b, err := os.ReadFile(filepath.Join(l.PKI(), name))
		if err != nil {
			return "", fmt.Errorf("read %s: %w", name, err)
		}
		return base64.StdEncoding.EncodeToString(b), nil
	}
	caData, err := read("ca.crt")
	if err != nil {
		return err
	}
	for _, id := range identities(f.NodeName) {
		crt, err := read(id.name + ".crt")
		if err != nil {
			return err
		}
		key, err := read(id.name + ".key")
		if err != nil {
			return err
		}
		kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: rdma-dra-local
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: rdma-dra-local
  context:
    cluster: rdma-dra-local
    user: %s
current-context: rdma-dra-local
`, l.APIServerURL(), caData, id.name, crt, key, id.name)
		paths := []string{filepath.Join(l.Kubeconfigs(), id.name+".kubeconfig")}
		if id.extra {
			paths = append(paths, l.Kubeconfig())
		}
		for _, p := range paths {
			if err := os.WriteFile(p, []byte(kc), 0o600); err != nil {
				return fmt.Errorf("write %s: %w", p, err)
			}
		}
	}
	return nil
}

func (l Layout) componentKubeconfig(name string) string {
	return filepath.Join(l.Kubeconfigs(), name+".kubeconfig")
}

func (l Layout) pkiFile(name string) string { return filepath.Join(l.PKI(), name) }

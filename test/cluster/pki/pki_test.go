package pki

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestIssueVerifies(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := NewCA("test-ca", now)
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Write(dir, "ca"); err != nil {
		t.Fatal(err)
	}
	loaded, err := LoadCA(dir, "ca")
	if err != nil {
		t.Fatalf("LoadCA: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(loaded.Cert)

	tests := []struct {
		leaf   Leaf
		usage  x509.ExtKeyUsage
		dns    string
		wantOK bool
	}{
		{Leaf{Name: "srv", CommonName: "srv", DNSNames: []string{"localhost"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}, Server: true}, x509.ExtKeyUsageServerAuth, "localhost", true},
		{Leaf{Name: "srv2", CommonName: "srv2", DNSNames: []string{"localhost"}, Server: true}, x509.ExtKeyUsageServerAuth, "other.example", false},
		{Leaf{Name: "node", CommonName: "system:node:n1", Organization: []string{"system:nodes"}, Client: true}, x509.ExtKeyUsageClientAuth, "", true},
		{Leaf{Name: "cli", CommonName: "cli", Client: true}, x509.ExtKeyUsageServerAuth, "", false},
	}
	for _, tc := range tests {
		t.Run(tc.leaf.Name, func(t *testing.T) {
			if err := loaded.Issue(dir, tc.leaf, now); err != nil {
				t.Fatalf("Issue: %v", err)
			}
			pair, err := tls.LoadX509KeyPair(filepath.Join(dir, tc.leaf.Name+".crt"), filepath.Join(dir, tc.leaf.Name+".key"))
			if err != nil {
				t.Fatalf("load pair: %v", err)
			}
			cert, err := x509.ParseCertificate(pair.Certificate[0])
			if err != nil {
				t.Fatal(err)
			}
			_, err = cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: tc.dns, KeyUsages: []x509.ExtKeyUsage{tc.usage}})
			if (err == nil) != tc.wantOK {
				t.Fatalf("verify err = %v, want ok=%v", err, tc.wantOK)
			}
			if len(tc.leaf.Organization) > 0 && cert.Subject.Organization[0] != tc.leaf.Organization[0] {
				t.Errorf("organization = %v", cert.Subject.Organization)
			}
			st, err := os.Stat(filepath.Join(dir, tc.leaf.Name+".key"))
			if err != nil || st.Mode().Perm() != 0o600 {
				t.Errorf("key mode = %v (%v), want 0600", st.Mode(), err)
			}
		})
	}
}

func TestServiceAccountKeys(t *testing.T) {
	dir := t.TempDir()
	if err := WriteServiceAccountKeys(dir); err != nil {
		t.Fatal(err)
	}
	key, err := readKey(filepath.Join(dir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	der, err := readPEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY")
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		t.Fatal(err)
	}
	if !key.Public().(*ecdsa.PublicKey).Equal(pub) {
		t.Error("sa.pub does not match sa.key")
	}
}

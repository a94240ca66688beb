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

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

func TestIssueVerifies(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := NewCA("test-ca")
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

// TestValidity: the CA lasts ten times a leaf's Validity, and both are valid from an hour
// before they were made, whichever code computes the dates.
func TestValidity(t *testing.T) {
	dir := t.TempDir()
	before := time.Now().Truncate(time.Second) // certificates store whole seconds
	ca, err := NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	if err := ca.Issue(dir, Leaf{Name: "leaf", CommonName: "leaf", Client: true}, time.Now()); err != nil {
		t.Fatal(err)
	}
	leaves, err := cert.CertsFromFile(filepath.Join(dir, "leaf.crt"))
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, tc := range []struct {
		name     string
		cert     *x509.Certificate
		lifetime time.Duration
		isCA     bool
	}{
		{"ca", ca.Cert, 10 * Validity, true},
		{"leaf", leaves[0], Validity, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cert.IsCA != tc.isCA {
				t.Errorf("IsCA = %v, want %v", tc.cert.IsCA, tc.isCA)
			}
			if nb := tc.cert.NotBefore; nb.Before(before.Add(-backdate)) || nb.After(after.Add(-backdate)) {
				t.Errorf("NotBefore %s, want an hour before it was made (%s..%s)", nb, before.Add(-backdate), after.Add(-backdate))
			}
			if na := tc.cert.NotAfter; na.Before(before.Add(tc.lifetime)) || na.After(after.Add(tc.lifetime)) {
				t.Errorf("NotAfter %s, want %s after it was made (%s..%s)", na, tc.lifetime, before.Add(tc.lifetime), after.Add(tc.lifetime))
			}
		})
	}
}

func TestServiceAccountKeys(t *testing.T) {
	dir := t.TempDir()
	if err := WriteServiceAccountKeys(dir); err != nil {
		t.Fatal(err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, "sa.key"))
	if err != nil {
		t.Fatal(err)
	}
	pubs, err := keyutil.PublicKeysFromFile(filepath.Join(dir, "sa.pub"))
	if err != nil {
		t.Fatal(err)
	}
	if len(pubs) != 1 || !key.(*ecdsa.PrivateKey).PublicKey.Equal(pubs[0]) {
		t.Error("sa.pub does not match sa.key")
	}
}

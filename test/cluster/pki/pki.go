// Package pki generates the certificate authority, serving certificates, client certificates
// and service-account keys of the local cluster with client-go's certificate and key
// helpers (k8s.io/client-go/util/cert and keyutil). Keys are ECDSA P-256, written as PEM
// files that every Kubernetes component reads.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Validity of every leaf certificate the package issues; the CA lasts ten times as long
// (cert.NewSelfSignedCACert's fixed ten years). The local cluster is short-lived.
const Validity = 365 * 24 * time.Hour

// backdate is how long before its creation a certificate becomes valid, so that a clock
// a little behind the one that issued it still accepts it.
const backdate = time.Hour

// CA is a certificate authority that can sign leaf certificates.
type CA struct {
	Cert *x509.Certificate
	Key  crypto.Signer
}

// Leaf describes a certificate to issue.
type Leaf struct {
	// Name is the file stem: <dir>/<Name>.crt and <dir>/<Name>.key.
	Name         string
	CommonName   string
	Organization []string
	DNSNames     []string
	IPs          []net.IP
	Server       bool
	Client       bool
}

// NewCA creates a self-signed CA, valid from an hour ago for ten years of the wall clock.
func NewCA(commonName string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	ca, err := cert.NewSelfSignedCACert(cert.Config{CommonName: commonName, NotBefore: time.Now().Add(-backdate)}, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	return &CA{Cert: ca, Key: key}, nil
}

// LoadCA reads a CA written by (*CA).Write.
func LoadCA(dir, name string) (*CA, error) {
	certs, err := cert.CertsFromFile(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, fmt.Errorf("load CA: %w", err)
	}
	key, err := keyutil.PrivateKeyFromFile(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, fmt.Errorf("load CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("load CA key: %T cannot sign", key)
	}
	return &CA{Cert: certs[0], Key: signer}, nil
}

// Write stores the CA as <dir>/<name>.crt and <dir>/<name>.key.
func (ca *CA) Write(dir, name string) error {
	return writePair(dir, name, ca.Cert, ca.Key)
}

// Issue signs a new leaf certificate with a fresh key and writes it to dir. client-go
// has no helper that signs with a given CA, so the template is built here.
func (ca *CA) Issue(dir string, l Leaf, now time.Time) error {
	if l.Name == "" || l.CommonName == "" {
		return errors.New("leaf needs a name and a common name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key of %s: %w", l.Name, err)
	}
	tmpl := &x509.Certificate{ // a nil SerialNumber makes x509 draw a random one
		Subject:     pkix.Name{CommonName: l.CommonName, Organization: l.Organization},
		DNSNames:    l.DNSNames,
		IPAddresses: l.IPs,
		NotBefore:   now.Add(-backdate),
		NotAfter:    now.Add(Validity),
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return fmt.Errorf("sign %s: %w", l.Name, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("parse %s: %w", l.Name, err)
	}
	return writePair(dir, l.Name, leaf, key)
}

// WriteServiceAccountKeys writes a signing key (<dir>/sa.key) and its public key (<dir>/sa.pub).
func WriteServiceAccountKeys(dir string) error {
	keyPEM, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pubs, err := keyutil.ParsePublicKeysPEM(keyPEM)
	if err != nil {
		return fmt.Errorf("read service-account public key: %w", err)
	}
	// keyutil reads public keys but does not write them.
	der, err := x509.MarshalPKIXPublicKey(pubs[0])
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := keyutil.WriteKey(filepath.Join(dir, "sa.key"), keyPEM); err != nil {
		return fmt.Errorf("write service-account key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: keyutil.PublicKeyBlockType, Bytes: der})
	if err := os.WriteFile(filepath.Join(dir, "sa.pub"), pubPEM, 0o644); err != nil {
		return fmt.Errorf("write service-account public key: %w", err)
	}
	return nil
}

// writePair writes <dir>/<name>.key (mode 0600) and <dir>/<name>.crt (mode 0644),
// creating dir.
func writePair(dir, name string, c *x509.Certificate, key crypto.Signer) error {
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return fmt.Errorf("encode key of %s: %w", name, err)
	}
	certPEM, err := cert.EncodeCertificates(c)
	if err != nil {
		return fmt.Errorf("encode certificate of %s: %w", name, err)
	}
	if err := keyutil.WriteKey(filepath.Join(dir, name+".key"), keyPEM); err != nil {
		return fmt.Errorf("write key of %s: %w", name, err)
	}
	if err := cert.WriteCert(filepath.Join(dir, name+".crt"), certPEM); err != nil {
		return fmt.Errorf("write certificate of %s: %w", name, err)
	}
	return nil
}

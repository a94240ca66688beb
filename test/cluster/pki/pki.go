// Package pki generates the certificate authority, serving certificates, client certificates
// and service-account keys of the local cluster. Keys are ECDSA P-256, written as PEM files
// that every Kubernetes component reads.
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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Validity of every certificate the package issues; the local cluster is short-lived.
const Validity = 365 * 24 * time.Hour

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

// NewCA creates a self-signed CA.
func NewCA(commonName string, now time.Time) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(10 * Validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("self-sign CA: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse CA: %w", err)
	}
	return &CA{Cert: cert, Key: key}, nil
}

// LoadCA reads a CA written by (*CA).Write.
func LoadCA(dir, name string) (*CA, error) {
	cert, err := readCert(filepath.Join(dir, name+".crt"))
	if err != nil {
		return nil, err
	}
	key, err := readKey(filepath.Join(dir, name+".key"))
	if err != nil {
		return nil, err
	}
	return &CA{Cert: cert, Key: key}, nil
}

// Write stores the CA as <dir>/<name>.crt and <dir>/<name>.key.
func (ca *CA) Write(dir, name string) error {
	return writePair(dir, name, ca.Cert.Raw, ca.Key)
}

// Issue signs a new leaf certificate with a fresh key and writes it to dir.
func (ca *CA) Issue(dir string, l Leaf, now time.Time) error {
	if l.Name == "" || l.CommonName == "" {
		return errors.New("leaf needs a name and a common name")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate key of %s: %w", l.Name, err)
	}
	serial, err := serialNumber()
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: l.CommonName, Organization: l.Organization},
		DNSNames:     l.DNSNames,
		IPAddresses:  l.IPs,
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(Validity),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
	}
	if l.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if l.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.Key)
	if err != nil {
		return fmt.Errorf("sign %s: %w", l.Name, err)
	}
	return writePair(dir, l.Name, der, key)
}

// WriteServiceAccountKeys writes a signing key (<dir>/sa.key) and its public key (<dir>/sa.pub).
func WriteServiceAccountKeys(dir string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("generate service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("marshal service-account public key: %w", err)
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, "sa.pub"), "PUBLIC KEY", pub, 0o644)
}

func serialNumber() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func writePair(dir, name string, certDER []byte, key crypto.Signer) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	if err := writeKey(filepath.Join(dir, name+".key"), key); err != nil {
		return err
	}
	return writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", certDER, 0o644)
}

func writeKey(path string, key crypto.Signer) error {
	ec, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return fmt.Errorf("key for %s is %T, want ECDSA", path, key)
	}
	der, err := x509.MarshalECPrivateKey(ec)
	if err != nil {
		return fmt.Errorf("marshal key for %s: %w", path, err)
	}
	return writePEM(path, "EC PRIVATE KEY", der, 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	data := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func readPEM(path, typ string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	b, _ := pem.Decode(data)
	if b == nil || b.Type != typ {
		return nil, fmt.Errorf("%s: no PEM block of type %s", path, typ)
	}
	return b.Bytes, nil
}

func readCert(path string) (*x509.Certificate, error) {
	der, err := readPEM(path, "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return c, nil
}

func readKey(path string) (crypto.Signer, error) {
	der, err := readPEM(path, "EC PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	k, err := x509.ParseECPrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", path, err)
	}
	return k, nil
}

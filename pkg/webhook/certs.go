package webhook

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// Keys of the certificate Secret; tls.crt and tls.key are what cert-manager writes too.
const (
	SecretCAKey   = "ca.crt"
	SecretCertKey = corev1.TLSCertKey
	SecretKeyKey  = corev1.TLSPrivateKeyKey
	// SecretCAKeyKey holds the CA's key, so that a renewed serving certificate is
	// signed by the same CA and the caBundle need not change.
	SecretCAKeyKey = "ca.key"
	// SecretPreviousCAKey holds the CA that a new CA replaced. Until it expires it stays
	// in the caBundle next to the new one: the other replicas keep serving certificates
	// of the old CA until their next check, and the API server must trust both meanwhile.
	SecretPreviousCAKey = "ca-previous.crt"
)

// Lifetimes of the self-managed certificates. The serving certificate is renewed when
// less than renewBefore is left; the controller checks every CertManager.Interval.
const (
	caLifetime   = 10 * 365 * 24 * time.Hour
	certLifetime = 365 * 24 * time.Hour
	renewBefore  = 30 * 24 * time.Hour
)

// CertManager keeps a self-signed CA and a serving certificate for the webhook Service
// in a Secret the chart created, and the CA in the caBundle of the
// ValidatingWebhookConfiguration. Every replica runs it: they agree through the Secret
// (an update with a stale resourceVersion fails and the loser reads the winner's).
type CertManager struct {
	Client kubernetes.Interface
	// Namespace and SecretName locate the Secret; it must exist (the chart creates it
	// empty), so that the controller needs no create permission on Secrets.
	Namespace, SecretName string
	// ServiceName is the webhook Service; the certificate is valid for its DNS names.
	ServiceName string
	// WebhookConfigName is the ValidatingWebhookConfiguration whose caBundle is kept.
	WebhookConfigName string
	// Now is the clock; nil means time.Now.
	Now func() time.Time

	mu   sync.RWMutex
	cert *tls.Certificate
}

// DNSNames are the names the API server may use for the Service.
func (m *CertManager) DNSNames() []string {
	svc := m.ServiceName + "." + m.Namespace
	return []string{m.ServiceName, svc, svc + ".svc", svc + ".svc.cluster.local"}
}

func (m *CertManager) now() time.Time {
	if m.Now != nil {
		return m.Now()
	}
	return time.Now()
}

// Ensure makes the Secret hold a valid CA and serving certificate, loads the serving
// certificate for GetCertificate and writes the CA into the webhook configuration.
func (m *CertManager) Ensure(ctx context.Context) error {
	secrets := m.Client.CoreV1().Secrets(m.Namespace)
	secret, err := secrets.Get(ctx, m.SecretName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get Secret %s/%s: %w", m.Namespace, m.SecretName, err)
	}
	caPEM, certPEM, keyPEM := secret.Data[SecretCAKey], secret.Data[SecretCertKey], secret.Data[SecretKeyKey]
	previousPEM := secret.Data[SecretPreviousCAKey]
	if reason := m.invalid(caPEM, certPEM, keyPEM); reason != "" {
		oldCAPEM := caPEM
		klog.FromContext(ctx).Info("Issuing webhook certificate", "secret", m.SecretName, "reason", reason)
		var caKeyPEM []byte
		if caPEM, caKeyPEM, certPEM, keyPEM, err = m.issue(caPEM, secret.Data[SecretCAKeyKey]); err != nil {
			return err
		}
		update := secret.DeepCopy()
		if update.Data == nil {
			update.Data = map[string][]byte{}
		}
		update.Data[SecretCAKey], update.Data[SecretCertKey], update.Data[SecretKeyKey] = caPEM, certPEM, keyPEM
		update.Data[SecretCAKeyKey] = caKeyPEM
		if !bytes.Equal(caPEM, oldCAPEM) {
			// A new CA: the old one, if it still verifies anything, is trusted alongside.
			previousPEM = nil
			if m.unexpired(oldCAPEM) {
				previousPEM = oldCAPEM
			}
			if previousPEM == nil {
				delete(update.Data, SecretPreviousCAKey)
			} else {
				update.Data[SecretPreviousCAKey] = previousPEM
			}
		}
		if _, err := secrets.Update(ctx, update, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("update Secret %s/%s: %w", m.Namespace, m.SecretName, err)
		}
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("load webhook certificate: %w", err)
	}
	m.mu.Lock()
	m.cert = &cert
	m.mu.Unlock()
	return m.patchCABundle(ctx, m.caBundle(caPEM, previousPEM))
}

// caBundle is the current CA, followed by the previous one while it has not expired.
func (m *CertManager) caBundle(caPEM, previousPEM []byte) []byte {
	if !m.unexpired(previousPEM) || bytes.Equal(caPEM, previousPEM) {
		return caPEM
	}
	bundle := append(bytes.TrimRight(slices.Clone(caPEM), "\n"), '\n')
	return append(bundle, previousPEM...)
}

// unexpired reports whether caPEM is a CA certificate that is still valid.
func (m *CertManager) unexpired(caPEM []byte) bool {
	ca, err := parseCert(caPEM)
	return err == nil && ca.IsCA && m.now().Before(ca.NotAfter)
}

// invalid says why the Secret's certificates cannot be used, or "".
func (m *CertManager) invalid(caPEM, certPEM, keyPEM []byte) string {
	if len(caPEM) == 0 || len(certPEM) == 0 || len(keyPEM) == 0 {
		return "no certificate yet"
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return "key pair unusable: " + err.Error()
	}
	ca, err := parseCert(caPEM)
	if err != nil {
		return "CA unusable: " + err.Error()
	}
	cert, err := parseCert(certPEM)
	if err != nil {
		return "certificate unusable: " + err.Error()
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range m.DNSNames() {
		if _, err := cert.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: m.now()}); err != nil {
			return "certificate does not verify for " + name + ": " + err.Error()
		}
	}
	if left := cert.NotAfter.Sub(m.now()); left < renewBefore {
		return fmt.Sprintf("certificate expires in %s", left.Round(time.Hour))
	}
	if ca.NotAfter.Before(m.now().Add(certLifetime)) {
		return "CA expires before a new certificate would"
	}
	return ""
}

// issue signs a new serving certificate with the existing CA when it is still good for
// a certificate's lifetime (so the caBundle stays), otherwise with a new CA.
func (m *CertManager) issue(oldCAPEM, oldCAKeyPEM []byte) (caPEM, caKeyPEM, certPEM, keyPEM []byte, err error) {
	now := m.now()
	var ca *x509.Certificate
	var caKey crypto.Signer
	if c, err := parseCert(oldCAPEM); err == nil && c.NotAfter.After(now.Add(certLifetime)) {
		if k, err := parseKey(oldCAKeyPEM); err == nil {
			ca, caKey, caPEM, caKeyPEM = c, k, oldCAPEM, oldCAKeyPEM
		}
	}
	if ca == nil {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("generate CA key: %w", err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: "rdma-dra-controller webhook CA"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
		if err != nil {
			return nil, nil, nil, nil, fmt.Errorf("create CA: %w", err)
		}
		if ca, err = x509.ParseCertificate(der); err != nil {
			return nil, nil, nil, nil, err
		}
		caKey, caPEM = key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		if caKeyPEM, err = encodeKey(key); err != nil {
			return nil, nil, nil, nil, err
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: m.DNSNames()[2]},
		DNSNames:  m.DNSNames(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	if keyPEM, err = encodeKey(key); err != nil {
		return nil, nil, nil, nil, err
	}
	return caPEM, caKeyPEM, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM, nil
}

// patchCABundle writes the bundle caPEM into every webhook of the configuration that lacks it. A
// JSON patch with a test of the resourceVersion would be stricter; the caBundle is the
// only field written, and writing the same value twice is harmless.
func (m *CertManager) patchCABundle(ctx context.Context, caPEM []byte) error {
	client := m.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	cfg, err := client.Get(ctx, m.WebhookConfigName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get ValidatingWebhookConfiguration %s: %w", m.WebhookConfigName, err)
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value []byte `json:"value"`
	}
	var ops []op
	for i, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, caPEM) {
			ops = append(ops, op{Op: "add", Path: fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i), Value: caPEM})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if _, err := client.Patch(ctx, m.WebhookConfigName, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch caBundle of %s: %w", m.WebhookConfigName, err)
	}
	klog.FromContext(ctx).Info("Wrote the webhook CA into the webhook configuration", "name", m.WebhookConfigName, "webhooks", len(ops))
	return nil
}

// GetCertificate serves the current certificate (tls.Config.GetCertificate).
func (m *CertManager) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.cert == nil {
		return nil, errors.New("no webhook certificate yet")
	}
	return m.cert, nil
}

func parseCert(data []byte) (*x509.Certificate, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate")
	}
	return x509.ParseCertificate(block.Bytes)
}

func parseKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM key")
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, errors.New("key cannot sign")
	}
	return signer, nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

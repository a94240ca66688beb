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
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
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
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return fmt.Errorf("load webhook certificate: %w", err)
	}
	m.mu.Lock()
	m.cert = &pair
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
	leaf, err := parseCert(certPEM)
	if err != nil {
		return "certificate unusable: " + err.Error()
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, name := range m.DNSNames() {
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: name, Roots: pool, CurrentTime: m.now()}); err != nil {
			return "certificate does not verify for " + name + ": " + err.Error()
		}
	}
	if left := leaf.NotAfter.Sub(m.now()); left < renewBefore {
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
	ca, caKey, err := parseCA(oldCAPEM, oldCAKeyPEM)
	if err == nil && ca.NotAfter.After(now.Add(certLifetime)) {
		caPEM, caKeyPEM = oldCAPEM, oldCAKeyPEM
	} else {
		// Not cert.NewSelfSignedCACert: it dates the CA by the wall clock, and every
		// renewal decision here runs on m.Now, so a CA it made would not last caLifetime
		// on the clock that decides when to replace it.
		tmpl := &x509.Certificate{
			Subject:   pkix.Name{CommonName: "rdma-dra-controller webhook CA"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caLifetime),
			IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		}
		if ca, caKey, caPEM, caKeyPEM, err = create(tmpl, nil, nil); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("create CA: %w", err)
		}
	}
	tmpl := &x509.Certificate{
		Subject:   pkix.Name{CommonName: m.DNSNames()[2]},
		DNSNames:  m.DNSNames(),
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(certLifetime),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	if _, _, certPEM, keyPEM, err = create(tmpl, ca, caKey); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("sign certificate: %w", err)
	}
	return caPEM, caKeyPEM, certPEM, keyPEM, nil
}

// create makes a P-256 key and a certificate of it from tmpl, signed by parent with
// parentKey, or self-signed when parent is nil. client-go has no helper that signs with a
// given CA; a nil tmpl.SerialNumber makes x509 draw a random serial.
func create(tmpl, parent *x509.Certificate, parentKey crypto.Signer) (c *x509.Certificate, key crypto.Signer, certPEM, keyPEM []byte, err error) {
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, nil, fmt.Errorf("generate key: %w", err)
	}
	if parent == nil {
		parent, parentKey = tmpl, ecKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, ecKey.Public(), parentKey)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if c, err = x509.ParseCertificate(der); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("parse certificate: %w", err)
	}
	if certPEM, err = cert.EncodeCertificates(c); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("encode certificate: %w", err)
	}
	if keyPEM, err = keyutil.MarshalPrivateKeyToPEM(ecKey); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("encode key: %w", err)
	}
	return c, ecKey, certPEM, keyPEM, nil
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

// parseCert returns the first certificate in data.
func parseCert(data []byte) (*x509.Certificate, error) {
	certs, err := cert.ParseCertsPEM(data)
	if err != nil {
		return nil, err
	}
	return certs[0], nil
}

// parseCA returns the CA certificate and its key. The key may be in any PEM form keyutil
// reads: earlier versions of the controller wrote PKCS #8, this one writes SEC 1.
func parseCA(caPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	ca, err := parseCert(caPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA: %w", err)
	}
	key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("parse CA key: %w", err)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, nil, fmt.Errorf("parse CA key: %T cannot sign", key)
	}
	return ca, signer, nil
}

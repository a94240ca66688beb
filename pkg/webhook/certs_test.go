package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/pem"
	"maps"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/keyutil"
)

func newCertManager(now time.Time) (*CertManager, *fake.Clientset) {
	client := fake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook-cert", Namespace: "rdma"}},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "rdma-webhook"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "claims.rdma.dra.io"}, {Name: "pools.rdma.dra.io"}}},
	)
	return &CertManager{Client: client, Namespace: "rdma", SecretName: "webhook-cert", ServiceName: "rdma-webhook",
		WebhookConfigName: "rdma-webhook", Now: func() time.Time { return now }}, client
}

func secretData(t *testing.T, client *fake.Clientset) map[string][]byte {
	t.Helper()
	s, err := client.CoreV1().Secrets("rdma").Get(context.Background(), "webhook-cert", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s.Data
}

func TestCertManagerIssuesRenewsAndPatches(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	m, client := newCertManager(now)
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	data := secretData(t, client)
	ca, err := parseCert(data[SecretCAKey])
	if err != nil {
		t.Fatal(err)
	}
	cert, err := m.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(cert.Certificate[0])
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{DNSName: "rdma-webhook.rdma.svc", Roots: roots}); err != nil {
		t.Errorf("serving certificate does not verify for the Service: %v", err)
	}
	cfg, _ := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "rdma-webhook", metav1.GetOptions{})
	for _, w := range cfg.Webhooks {
		if !bytes.Equal(w.ClientConfig.CABundle, data[SecretCAKey]) {
			t.Errorf("webhook %s has caBundle %q", w.Name, w.ClientConfig.CABundle)
		}
	}

	// A second replica, or a restart, reuses what is there.
	client.ClearActions()
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("unexpected %s %s with a valid certificate", a.GetVerb(), a.GetResource().Resource)
		}
	}

	// Eleven months later the serving certificate is renewed by the same CA: the
	// caBundle does not change.
	m.Now = func() time.Time { return now.Add(340 * 24 * time.Hour) }
	if err := m.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	renewed := secretData(t, client)
	if bytes.Equal(renewed[SecretCertKey], data[SecretCertKey]) {
		t.Error("certificate was not renewed")
	}
	if !bytes.Equal(renewed[SecretCAKey], data[SecretCAKey]) {
		t.Error("CA changed on renewal")
	}
}

func TestCertManagerReplacesGarbage(t *testing.T) {
	m, client := newCertManager(time.Now())
	s, _ := client.CoreV1().Secrets("rdma").Get(context.Background(), "webhook-cert", metav1.GetOptions{})
	s.Data = map[string][]byte{SecretCAKey: []byte("x"), SecretCertKey: []byte("y"), SecretKeyKey: []byte("z")}
	_, _ = client.CoreV1().Secrets("rdma").Update(context.Background(), s, metav1.UpdateOptions{})
	if err := m.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if reason := m.invalid(secretData(t, client)[SecretCAKey], secretData(t, client)[SecretCertKey], secretData(t, client)[SecretKeyKey]); reason != "" {
		t.Errorf("still invalid: %s", reason)
	}
}

func TestCertManagerNeedsItsSecret(t *testing.T) {
	m, client := newCertManager(time.Now())
	_ = client.CoreV1().Secrets("rdma").Delete(context.Background(), "webhook-cert", metav1.DeleteOptions{})
	if err := m.Ensure(context.Background()); err == nil {
		t.Error("Ensure without the Secret succeeded; the controller may not create Secrets")
	}
}

// TestCertManagerRenewsWithStoredCAKey: a renewal reuses the CA whatever PEM form its key
// was stored in (PKCS #8 by earlier versions of the controller, SEC 1 by this one), and
// replaces a CA whose key does not parse.
func TestCertManagerRenewsWithStoredCAKey(t *testing.T) {
	pkcs8 := func(t *testing.T, keyPEM []byte) []byte {
		t.Helper()
		key, err := keyutil.ParsePrivateKeyPEM(keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	}
	for _, tc := range []struct {
		name       string
		rewrite    func(t *testing.T, keyPEM []byte) []byte
		wantSameCA bool
	}{
		{"SEC 1", func(_ *testing.T, keyPEM []byte) []byte { return keyPEM }, true},
		{"PKCS 8", pkcs8, true},
		{"garbage", func(*testing.T, []byte) []byte { return []byte("z") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			now := time.Now()
			m, client := newCertManager(now)
			if err := m.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			s, err := client.CoreV1().Secrets("rdma").Get(ctx, "webhook-cert", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			first := maps.Clone(s.Data)
			s.Data[SecretCAKeyKey] = tc.rewrite(t, s.Data[SecretCAKeyKey])
			if _, err := client.CoreV1().Secrets("rdma").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}

			m.Now = func() time.Time { return now.Add(340 * 24 * time.Hour) }
			if err := m.Ensure(ctx); err != nil {
				t.Fatal(err)
			}
			renewed := secretData(t, client)
			if bytes.Equal(renewed[SecretCertKey], first[SecretCertKey]) {
				t.Error("certificate was not renewed")
			}
			if same := bytes.Equal(renewed[SecretCAKey], first[SecretCAKey]); same != tc.wantSameCA {
				t.Errorf("CA kept = %v, want %v", same, tc.wantSameCA)
			}
			if _, _, err := parseCA(renewed[SecretCAKey], renewed[SecretCAKeyKey]); err != nil {
				t.Errorf("renewed CA: %v", err)
			}
		})
	}
}

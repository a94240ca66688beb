package metricsauth

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2/ktesting"
)

// serveTLS serves h over TLS on a loopback listener the way the binaries do
// (http.Server.ServeTLS with only a TLS configuration) and returns its URL.
func serveTLS(t *testing.T, h http.Handler, cfg *tls.Config) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, TLSConfig: cfg, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(lis, "", "") }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	return "https://" + lis.Addr().String()
}

// get requests url on a new connection, with the token when it is not empty, and
// returns the status and the server's certificate.
func get(t *testing.T, url, token string, clientTLS *tls.Config) (int, []byte) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: clientTLS, DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer func() { _ = resp.Body.Close() }()
	return resp.StatusCode, resp.TLS.PeerCertificates[0].Raw
}

// insecure is how scrapers of a self-signed endpoint connect: the token protects it.
var insecure = &tls.Config{InsecureSkipVerify: true}

func TestTLSSelfSigned(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg, err := TLSConfig(ctx, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 || len(cfg.Certificates) != 1 {
		t.Fatalf("TLS config: min version %x, %d certificates", cfg.MinVersion, len(cfg.Certificates))
	}
	api := &fakeAPI{}
	url := serveTLS(t, New(api.client(), &nextHandler{}, Options{}), cfg)
	for _, tt := range []struct {
		token string
		want  int
	}{{scraperToken, http.StatusOK}, {"", http.StatusUnauthorized}, {strangerToken, http.StatusForbidden}} {
		status, peer := get(t, url, tt.token, insecure)
		if status != tt.want {
			t.Errorf("token %q: status %d, want %d", tt.token, status, tt.want)
		}
		if !bytes.Equal(peer, cfg.Certificates[0].Certificate[0]) {
			t.Error("the server did not present the self-signed certificate")
		}
	}
	old := &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: old}}
	if resp, err := client.Get(url + "/metrics"); err == nil {
		_ = resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}
}

// writePair writes a new key pair and sets the files' modification time; it returns
// the DER of the serving certificate.
func writePair(t *testing.T, certFile, keyFile string, modified time.Time) []byte {
	t.Helper()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("localhost", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for file, data := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(file, modified, modified); err != nil {
			t.Fatal(err)
		}
	}
	block, _ := pem.Decode(certPEM)
	return block.Bytes
}

func TestTLSCertificateFiles(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	if _, err := TLSConfig(ctx, certFile, keyFile); err == nil {
		t.Fatal("TLSConfig with missing files succeeded; a wrong path must fail at start")
	}
	start := time.Now().Add(-time.Hour)
	first := writePair(t, certFile, keyFile, start)
	cfg, err := TLSConfig(ctx, certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("min version %x", cfg.MinVersion)
	}
	api := &fakeAPI{}
	url := serveTLS(t, New(api.client(), &nextHandler{}, Options{}), cfg)
	if status, peer := get(t, url, scraperToken, insecure); status != http.StatusOK || !bytes.Equal(peer, first) {
		t.Errorf("status %d, served the files' certificate: %v", status, bytes.Equal(peer, first))
	}
	if status, _ := get(t, url, "", insecure); status != http.StatusUnauthorized {
		t.Errorf("without a token: status %d, want 401", status)
	}

	// cert-manager renews the Secret: the next connection gets the new certificate.
	second := writePair(t, certFile, keyFile, start.Add(time.Minute))
	if status, peer := get(t, url, scraperToken, insecure); status != http.StatusOK || !bytes.Equal(peer, second) {
		t.Errorf("after the rewrite: status %d, served the new certificate: %v", status, bytes.Equal(peer, second))
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"off", Config{}, ""},
		{"secure, self-signed", Config{Secure: true}, ""},
		{"secure with files", Config{Secure: true, CertFile: "c", KeyFile: "k"}, ""},
		{"cert without key", Config{Secure: true, CertFile: "c"}, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"key without cert", Config{Secure: true, KeyFile: "k"}, "--metrics-tls-cert-file and --metrics-tls-key-file must be set together"},
		{"files without secure", Config{CertFile: "c", KeyFile: "k"}, "need --metrics-secure"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if (tt.want == "") != (err == nil) || (err != nil && !bytes.Contains([]byte(err.Error()), []byte(tt.want))) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}

func TestProtect(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	next := &nextHandler{}
	api := &fakeAPI{}
	h, cfg, err := Config{}.Protect(ctx, api.client(), next)
	if err != nil || cfg != nil || h != http.Handler(next) {
		t.Errorf("Protect without Secure: %v, %v, %v; want the handler itself and no TLS", h, cfg, err)
	}
	h, cfg, err = Config{Secure: true}.Protect(ctx, api.client(), next)
	if err != nil || cfg == nil {
		t.Fatalf("Protect: %v, %v", cfg, err)
	}
	if _, ok := h.(*Handler); !ok {
		t.Errorf("Protect returned %T, want *Handler", h)
	}
}

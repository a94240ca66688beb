package metricsauth

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"

	"k8s.io/client-go/kubernetes"
)

// Config is how an endpoint is served, one field per flag: --metrics-secure,
// --metrics-tls-cert-file and --metrics-tls-key-file. The zero value is plain HTTP
// without authentication.
type Config struct {
	// Secure serves HTTPS and requires a bearer token allowed to get the path.
	Secure bool
	// CertFile and KeyFile are the serving certificate, re-read when they change; both
	// empty: a self-signed certificate made at start.
	CertFile, KeyFile string
}

// Validate refuses half a key pair and a key pair without Secure.
func (c Config) Validate() error {
	if (c.CertFile == "") != (c.KeyFile == "") {
		return errors.New("--metrics-tls-cert-file and --metrics-tls-key-file must be set together")
	}
	if c.CertFile != "" && !c.Secure {
		return errors.New("--metrics-tls-cert-file and --metrics-tls-key-file need --metrics-secure")
	}
	return nil
}

// Protect returns next wrapped with a Handler and the TLS configuration to serve it with,
// or next and nil when c.Secure is false.
func (c Config) Protect(ctx context.Context, client kubernetes.Interface, next http.Handler) (http.Handler, *tls.Config, error) {
	if !c.Secure {
		return next, nil, nil
	}
	tlsConfig, err := TLSConfig(ctx, c.CertFile, c.KeyFile)
	if err != nil {
		return nil, nil, err
	}
	return New(client, next, Options{}), tlsConfig, nil
}

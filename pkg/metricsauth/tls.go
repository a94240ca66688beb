package metricsauth

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"

	"k8s.io/client-go/util/cert"
	"k8s.io/klog/v2"

	"github.com/rdma-dra/rdma-dra-driver/pkg/certfile"
)

// TLSConfig is the server side of the secure endpoint (TLS 1.2 or newer). With certFile
// and keyFile it serves that pair, re-read on the first handshake after the files change
// (a cert-manager renewal of a mounted Secret needs no restart); the pair must load now,
// so that a wrong path fails at start. Without them it serves a certificate that it signs
// itself, in memory, valid for a year from start: scrapers then skip verification, and
// the bearer token, not the certificate, is what protects the endpoint.
func TLSConfig(ctx context.Context, certFile, keyFile string) (*tls.Config, error) {
	logger := klog.FromContext(ctx)
	if certFile != "" || keyFile != "" {
		r := &certfile.Reloader{CertFile: certFile, KeyFile: keyFile}
		if _, err := r.GetCertificate(nil); err != nil {
			return nil, fmt.Errorf("metrics serving certificate: %w", err)
		}
		logger.Info("Serving metrics with the certificate in files", "certFile", certFile, "keyFile", keyFile)
		return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: r.GetCertificate}, nil
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"})
	if err != nil {
		return nil, fmt.Errorf("generate self-signed metrics certificate: %w", err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("load self-signed metrics certificate: %w", err)
	}
	logger.Info("Serving metrics with a self-signed certificate; scrapers must skip verification or set --metrics-tls-cert-file and --metrics-tls-key-file", "host", host)
	return &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{pair}}, nil
}

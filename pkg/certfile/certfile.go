// Package certfile serves a TLS certificate from files that something else keeps up to
// date (cert-manager, a mounted Secret), re-reading them when they change.
package certfile

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reloader serves the key pair in CertFile and KeyFile. It re-reads both when the newest
// modification time of the two changes, so a renewed Secret is served from the next
// handshake on without a restart. A Kubernetes Secret volume swaps both files at once
// (one symlink), so a handshake never sees the certificate of one pair with the key of
// another for longer than a failed load, which keeps the previous pair.
type Reloader struct {
	CertFile, KeyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	modified time.Time
}

// GetCertificate returns the current pair (tls.Config.GetCertificate). Once a pair was
// loaded, a file that is missing or does not load (mid-rotation) keeps the previous one.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var newest time.Time
	for _, name := range []string{r.CertFile, r.KeyFile} {
		st, err := os.Stat(name)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil
			}
			return nil, fmt.Errorf("stat certificate: %w", err)
		}
		if st.ModTime().After(newest) {
			newest = st.ModTime()
		}
	}
	if r.cert == nil || !newest.Equal(r.modified) {
		cert, err := tls.LoadX509KeyPair(r.CertFile, r.KeyFile)
		if err != nil {
			if r.cert != nil {
				return r.cert, nil
			}
			return nil, fmt.Errorf("load certificate: %w", err)
		}
		r.cert, r.modified = &cert, newest
	}
	return r.cert, nil
}

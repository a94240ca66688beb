package certfile

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
)

// writePair writes a new self-signed pair for host and sets both files' modification
// time, which is what the reloader compares.
func writePair(t *testing.T, dir, host string, modified time.Time) []byte {
	t.Helper()
	crt, key, err := cert.GenerateSelfSignedCertKey(host, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": crt, "tls.key": key} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, modified, modified); err != nil {
			t.Fatal(err)
		}
	}
	return crt
}

func TestReloader(t *testing.T) {
	dir := t.TempDir()
	r := &Reloader{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	if _, err := r.GetCertificate(&tls.ClientHelloInfo{}); err == nil {
		t.Fatal("GetCertificate without files succeeded")
	}
	start := time.Now().Add(-time.Hour)
	writePair(t, dir, "first", start)
	c1, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.GetCertificate(&tls.ClientHelloInfo{}); again != c1 {
		t.Error("unchanged files were loaded again")
	}

	writePair(t, dir, "second", start.Add(time.Minute))
	c2, err := r.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(c1.Certificate[0], c2.Certificate[0]) {
		t.Error("certificate was not reloaded after the files changed")
	}

	// Mid-rotation: a missing or broken file keeps the pair that was loaded last.
	if err := os.Remove(r.KeyFile); err != nil {
		t.Fatal(err)
	}
	if c, err := r.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c != c2 {
		t.Errorf("missing key file: %v, %v; want the previous certificate", c, err)
	}
	if err := os.WriteFile(r.KeyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := r.GetCertificate(&tls.ClientHelloInfo{}); err != nil || c != c2 {
		t.Errorf("broken key file: %v, %v; want the previous certificate", c, err)
	}
}

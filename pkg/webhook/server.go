package webhook

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Limits of the webhook's HTTPS server. The API server calls with a timeout of at most
// 30 s (the configuration's timeoutSeconds, 5 s in the chart) and small bodies; anything
// slower or larger is not the API server, or is an API server that has given up already.
const (
	// MaxInFlight is how many reviews are read and decided at once; more wait for a slot
	// as long as their request lasts. Memory is bounded by MaxInFlight * MaxBody and a
	// few times that for decoding.
	MaxInFlight = 4
	// ReadHeaderTimeout, ReadTimeout, WriteTimeout and IdleTimeout bound a connection:
	// a client that sends slowly, reads slowly or idles is cut off.
	ReadHeaderTimeout = 5 * time.Second
	ReadTimeout       = 15 * time.Second
	WriteTimeout      = 30 * time.Second
	IdleTimeout       = 90 * time.Second
	// MaxHeaderBytes bounds the request's headers; the API server sends a few hundred bytes.
	MaxHeaderBytes = 16 << 10
)

// NewServer returns the webhook's HTTPS server: the validator at Path behind a limit of
// MaxInFlight reviews at once, with the timeouts above. ctx is every request's base
// context (for logging) and ends the server's requests when it ends.
func NewServer(ctx context.Context, addr string, v http.Handler, tlsConfig *tls.Config) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(Path, Limit(v, MaxInFlight, ReadTimeout))
	return &http.Server{
		Addr:              addr,
		Handler:           mux,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
}

// Limit lets at most n requests into h at once. A request waits for a slot at most wait
// (less if the client goes away) and is then answered 503, which the API server treats
// like any webhook failure (the configuration's failurePolicy).
func Limit(h http.Handler, n int, wait time.Duration) http.Handler {
	slots := make(chan struct{}, n)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		queued, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		select {
		case slots <- struct{}{}:
			defer func() { <-slots }()
			h.ServeHTTP(w, r)
		case <-queued.Done():
			http.Error(w, "too many admission reviews at once", http.StatusServiceUnavailable)
		}
	})
}

package webhook

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"time"
)

// Limits of the webhook's HTTPS server. The API server calls with a timeout of at most
// 30 s (the configuration's timeoutSeconds, 5 s in the chart) and small bodies over the
// cluster network; anything slower or larger is not the API server, or is an API server
// that has given up already. A client that sends slowly holds its connection until the
// read timeouts cut it off, never a review slot (Limit).
const (
	// MaxInFlight is how many reviews are decided at once. A review takes a slot only
	// once its body is in memory and gives it back before its response is written, so
	// a slot is held for the CPU time of one decision.
	MaxInFlight = 4
	// SlotWait is how long a review that has been read waits for a slot. With
	// ReadTimeout it stays within the chart's 5 s timeout, so that the API server gets
	// a clear 503 rather than a timeout of its own.
	SlotWait = time.Second
	// BodyBudget bounds the memory of request bodies being read or waiting for a slot:
	// as many whole reviews of the largest size as there are slots. Reviews of claims
	// are a few KiB, so thousands fit; slow clients hold only what they have sent.
	BodyBudget = MaxInFlight * MaxBody
	// ReadHeaderTimeout bounds the headers of a request, from its first byte (from the
	// connection's start for its first request); ReadTimeout bounds the whole request,
	// body included. The API server sends a review at once; at ReadTimeout even a
	// review of MaxBody comes at over 2 MiB/s.
	ReadHeaderTimeout = 2 * time.Second
	ReadTimeout       = 3 * time.Second
	// WriteTimeout bounds the TLS handshake and the response; IdleTimeout closes a
	// kept-alive connection that sends no next request (it holds no slot and no budget).
	WriteTimeout = 10 * time.Second
	IdleTimeout  = 90 * time.Second
	// MaxHeaderBytes bounds the request's headers; the API server sends a few hundred bytes.
	MaxHeaderBytes = 16 << 10
)

// NewServer returns the webhook's HTTPS server: the validator at Path behind Limit (at
// most MaxInFlight reviews decided at once, BodyBudget bytes of bodies in memory), with
// the timeouts above. ctx is every request's base context (for logging) and ends the
// server's requests when it ends.
func NewServer(ctx context.Context, addr string, v http.Handler, tlsConfig *tls.Config) *http.Server {
	mux := http.NewServeMux()
	mux.Handle(Path, Limit(v, Limits{Slots: MaxInFlight, SlotWait: SlotWait, MaxBody: MaxBody, Budget: BodyBudget}))
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

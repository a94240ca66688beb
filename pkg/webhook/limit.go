package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync/atomic"
	"time"

	"k8s.io/klog/v2"
)

// Limits bound what the requests of a handler wrapped by Limit hold at once.
type Limits struct {
	// Slots is how many requests are decided at once.
	Slots int
	// SlotWait is how long a request whose body has been read waits for a slot before
	// it is answered 503.
	SlotWait time.Duration
	// MaxBody is the largest request body read; a larger one is answered 413.
	MaxBody int64
	// Budget is how many bytes of request bodies are held in memory at once, being read
	// or waiting for a slot; a request that would need more is answered 503.
	Budget int64
}

// Limit wraps h so that a slot is held only while h decides, never while a client sends
// or reads: the request body is read whole into memory first (within the connection's
// read deadline, see NewServer), then the request waits for one of l.Slots, h writes
// its response to memory, and the slot is released before the response goes to the
// client. Slow clients thus cost their connections and the bytes they actually sent
// (bounded by l.Budget), and cannot keep a review waiting for a slot.
//
// A 503 is treated by the API server like any webhook failure (the configuration's
// failurePolicy).
func Limit(h http.Handler, l Limits) http.Handler {
	return &limiter{next: h, limits: l, slots: make(chan struct{}, l.Slots)}
}

type limiter struct {
	next   http.Handler
	limits Limits
	slots  chan struct{}
	// held is the bytes of bodies in memory; see reserve.
	held atomic.Int64
}

// errOverBudget is a body that would take the memory of bodies over the budget.
var errOverBudget = errors.New("too many admission reviews being read")

func (l *limiter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	logger := klog.FromContext(r.Context())
	body, held, err := l.readBody(w, r)
	defer l.release(held)
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.As(err, &tooLarge):
			http.Error(w, "read AdmissionReview: too large", http.StatusRequestEntityTooLarge)
		case errors.Is(err, errOverBudget):
			// The rest of the body is not read: the connection cannot carry another
			// request.
			w.Header().Set("Connection", "close")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		default:
			http.Error(w, "read AdmissionReview: unreadable or too slow", http.StatusBadRequest)
		}
		logger.V(2).Info("Refused an admission review", "remoteAddr", r.RemoteAddr, "err", err)
		return
	}

	queued, cancel := context.WithTimeout(r.Context(), l.limits.SlotWait)
	defer cancel()
	select {
	case l.slots <- struct{}{}:
	case <-queued.Done():
		logger.V(2).Info("Refused an admission review: no slot", "remoteAddr", r.RemoteAddr, "wait", l.limits.SlotWait)
		http.Error(w, "too many admission reviews at once", http.StatusServiceUnavailable)
		return
	}
	resp := &bufferedResponse{header: http.Header{}}
	func() {
		defer func() { <-l.slots }()
		req := r.WithContext(r.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		l.next.ServeHTTP(resp, req)
	}()
	if err := resp.writeTo(w); err != nil {
		logger.V(2).Info("Could not write an admission review response", "err", err)
	}
}

// readBody reads r's body whole, at most l.limits.MaxBody bytes. Every byte of buffer is
// reserved from the budget before it is allocated, so the memory of bodies stays within
// it whatever clients send; held is what to release once the body is no longer needed,
// also when err is set.
func (l *limiter) readBody(w http.ResponseWriter, r *http.Request) (body []byte, held int64, err error) {
	// MaxBytesReader, unlike a LimitReader, also makes the server close the connection
	// of a body that is too large instead of reading the rest of it.
	src := http.MaxBytesReader(w, r.Body, l.limits.MaxBody)
	for {
		if len(body) == cap(body) {
			// Grow as io.ReadAll does (512 bytes, then doubling), up to one byte more
			// than the limit, which is how MaxBytesReader tells of a larger body.
			size := min(max(512, 2*int64(cap(body))), l.limits.MaxBody+1)
			if !l.reserve(size - held) {
				return nil, held, errOverBudget
			}
			held = size
			grown := make([]byte, len(body), size)
			copy(grown, body)
			body = grown
		}
		n, err := src.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if errors.Is(err, io.EOF) {
			return body, held, nil
		}
		if err != nil {
			return nil, held, fmt.Errorf("read body: %w", err)
		}
	}
}

// reserve takes n bytes of the budget if they are free. It never waits: a request that
// waited for memory while holding some could hold it for others that wait in turn.
func (l *limiter) reserve(n int64) bool {
	if l.held.Add(n) > l.limits.Budget {
		l.held.Add(-n)
		return false
	}
	return true
}

func (l *limiter) release(n int64) { l.held.Add(-n) }

// bufferedResponse keeps a response in memory, so that it is written to the client after
// the slot is released: a client that reads slowly holds only its own connection.
type bufferedResponse struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *bufferedResponse) Header() http.Header { return b.header }

func (b *bufferedResponse) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *bufferedResponse) Write(p []byte) (int, error) {
	b.WriteHeader(http.StatusOK)
	return b.body.Write(p)
}

func (b *bufferedResponse) writeTo(w http.ResponseWriter) error {
	maps.Copy(w.Header(), b.header)
	b.WriteHeader(http.StatusOK)
	w.WriteHeader(b.code)
	if _, err := w.Write(b.body.Bytes()); err != nil {
		return fmt.Errorf("write response: %w", err)
	}
	return nil
}

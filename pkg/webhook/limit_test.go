package webhook

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// echo answers 200 with the request's body, so that a test sees the body got through whole.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	_, _ = w.Write(body)
})

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// TestLimitAnswers: what a request gets for its body when nothing else is in flight; the
// memory it reserved is given back whatever the answer.
func TestLimitAnswers(t *testing.T) {
	for _, tt := range []struct {
		name       string
		body       string
		unreadable bool
		budget     int64
		wantCode   int
	}{
		{name: "small body", body: "review", budget: 4096, wantCode: http.StatusOK},
		{name: "body of MaxBody", body: strings.Repeat("r", 1024), budget: 4096, wantCode: http.StatusOK},
		{name: "body over MaxBody", body: strings.Repeat("r", 1025), budget: 4096, wantCode: http.StatusRequestEntityTooLarge},
		{name: "body over the budget", body: strings.Repeat("r", 1000), budget: 1000, wantCode: http.StatusServiceUnavailable},
		{name: "unreadable body", unreadable: true, budget: 4096, wantCode: http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := Limit(echo, Limits{Slots: 1, SlotWait: time.Second, MaxBody: 1024, Budget: tt.budget}).(*limiter)
			var body io.Reader = strings.NewReader(tt.body)
			if tt.unreadable {
				body = failingReader{}
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, body))
			if rec.Code != tt.wantCode {
				t.Errorf("HTTP %d, want %d: %s", rec.Code, tt.wantCode, rec.Body)
			}
			if rec.Code == http.StatusOK && rec.Body.String() != tt.body {
				t.Errorf("the handler got %d bytes of a body of %d", rec.Body.Len(), len(tt.body))
			}
			if held := h.held.Load(); held != 0 {
				t.Errorf("%d bytes of the budget still held", held)
			}
		})
	}
}

// blockingWriter is a client that does not read its response: Write waits for unblock.
type blockingWriter struct {
	*httptest.ResponseRecorder
	unblock chan struct{}
}

func (b blockingWriter) Write(p []byte) (int, error) {
	<-b.unblock
	return b.ResponseRecorder.Write(p)
}

// TestLimitHoldsSlotsOnlyToDecide: with one slot, a client still sending its body and a
// client not reading its response do not keep another review from being decided at once;
// a review being decided does, for SlotWait, and is then answered 503. In a synctest
// bubble, so that "at once" and SlotWait are exact on its clock.
func TestLimitHoldsSlotsOnlyToDecide(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		decide := make(chan struct{})
		h := Limit(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if body, _ := io.ReadAll(r.Body); string(body) == "slow to decide" {
				<-decide
			}
			echo.ServeHTTP(w, r)
		}), Limits{Slots: 1, SlotWait: 2 * time.Second, MaxBody: 1024, Budget: 4096})
		serve := func(w http.ResponseWriter, body io.Reader) int {
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, Path, body))
			if rec, ok := w.(*httptest.ResponseRecorder); ok {
				return rec.Code
			}
			return w.(blockingWriter).Code
		}
		var background sync.WaitGroup
		inBackground := func(w http.ResponseWriter, body io.Reader, want int) {
			background.Go(func() {
				if code := serve(w, body); code != want {
					t.Errorf("request in the background: HTTP %d, want %d", code, want)
				}
			})
		}
		check := func(what string, wantCode int, wantWait time.Duration) {
			t.Helper()
			start := time.Now()
			if code := serve(httptest.NewRecorder(), strings.NewReader("review")); code != wantCode {
				t.Errorf("%s: HTTP %d, want %d", what, code, wantCode)
			}
			if waited := time.Since(start); waited != wantWait {
				t.Errorf("%s: answered after %s, want %s", what, waited, wantWait)
			}
		}

		// A client that has sent half of its body.
		bodyReader, bodyWriter := io.Pipe()
		inBackground(httptest.NewRecorder(), bodyReader, http.StatusOK)
		background.Go(func() { _, _ = io.WriteString(bodyWriter, "half a re") })
		synctest.Wait()
		check("while a client sends slowly", http.StatusOK, 0)

		// A client that does not read its response.
		unblock := make(chan struct{})
		inBackground(blockingWriter{httptest.NewRecorder(), unblock}, strings.NewReader("review"), http.StatusOK)
		synctest.Wait()
		check("while a client reads slowly", http.StatusOK, 0)

		// A review being decided holds the slot.
		inBackground(httptest.NewRecorder(), strings.NewReader("slow to decide"), http.StatusOK)
		synctest.Wait()
		check("while the slot decides", http.StatusServiceUnavailable, 2*time.Second)
		close(decide)
		synctest.Wait()
		check("once the slot is free", http.StatusOK, 0)

		_, _ = io.WriteString(bodyWriter, "view")
		_ = bodyWriter.Close()
		close(unblock)
		background.Wait()
		if held := h.(*limiter).held.Load(); held != 0 {
			t.Errorf("%d bytes of the budget still held", held)
		}
	})
}

package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHTTPCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/health":
			fmt.Fprint(w, `{"health":"true","reason":""}`)
		case "/sick":
			fmt.Fprint(w, `{"health":"false","reason":"no leader"}`)
		default:
			http.Error(w, "[-]etcd failed", http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	tests := []struct {
		name, path, want string
		wantErr          string
	}{
		{name: "200, any body", path: "/health"},
		{name: "200 with the wanted body", path: "/health", want: `"health":"true"`},
		{name: "200 without the wanted body", path: "/sick", want: `"health":"true"`, wantErr: `200 OK: {"health":"false"`},
		{name: "not 200", path: "/readyz", wantErr: "500 Internal Server Error: [-]etcd failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := HTTPCheck(srv.Client(), srv.URL+tt.path, tt.want)(context.Background())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want ready", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("error %v, want one with %q", err, tt.wantErr)
			}
		})
	}
}

func TestSelfSignedClient(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }))
	// The verifying client's failed handshake is expected; keep it out of the output.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	ctx := context.Background()
	if err := HTTPCheck(SelfSignedClient(time.Second), srv.URL, "ok")(ctx); err != nil {
		t.Errorf("self-signed server: %v", err)
	}
	// A client that verifies refuses the same server: the helper is what makes it work.
	if err := HTTPCheck(&http.Client{Timeout: time.Second}, srv.URL, "ok")(ctx); err == nil {
		t.Error("a verifying client reached the self-signed server")
	}
}

func TestWaitFor(t *testing.T) {
	errNotYet := errors.New("not yet")
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		timeout   time.Duration
		readyAt   int // the call that passes; 0: none
		alive     func() bool
		wantCalls int
		wantErr   string // empty: ready
		wantIs    error
	}{
		{name: "ready at once", ctx: context.Background(), timeout: time.Minute, readyAt: 1, wantCalls: 1},
		{name: "ready at the third check", ctx: context.Background(), timeout: time.Minute, readyAt: 3, wantCalls: 3},
		{name: "ready while alive", ctx: context.Background(), timeout: time.Minute, readyAt: 2, alive: func() bool { return true }, wantCalls: 2},
		{
			name: "process gone", ctx: context.Background(), timeout: time.Minute, alive: func() bool { return false },
			wantCalls: 1, wantErr: "etcd exited: not yet", wantIs: errNotYet,
		},
		{
			name: "timeout", ctx: context.Background(), timeout: time.Millisecond,
			wantCalls: 1, wantErr: "etcd not ready after 1ms: not yet", wantIs: errNotYet,
		},
		{
			name: "caller gives up", ctx: canceled, timeout: time.Minute,
			wantCalls: 1, wantErr: "wait for etcd: context canceled (last: not yet)", wantIs: context.Canceled,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls := 0
			err := WaitFor(tt.ctx, "etcd", tt.timeout, tt.alive, func(ctx context.Context) error {
				calls++
				if _, ok := ctx.Deadline(); !ok {
					t.Error("check without a deadline")
				}
				if calls == tt.readyAt {
					return nil
				}
				return errNotYet
			})
			if calls != tt.wantCalls {
				t.Errorf("%d checks, want %d", calls, tt.wantCalls)
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("error %v, want ready", err)
			case tt.wantErr != "" && (err == nil || err.Error() != tt.wantErr):
				t.Errorf("error %v, want %q", err, tt.wantErr)
			case tt.wantIs != nil && !errors.Is(err, tt.wantIs):
				t.Errorf("error %v does not wrap %v", err, tt.wantIs)
			}
		})
	}
}

func TestWaitReadySaysHowTheProcessEnded(t *testing.T) {
	bin, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no false(1) on PATH")
	}
	ctx := context.Background()
	p, err := StartProcess(ctx, "false", filepath.Join(t.TempDir(), "false.log"), bin)
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	err = p.waitReady(ctx, time.Minute, func(context.Context) error { return errors.New("connection refused") })
	if want := "false exited: connection refused (exit status 1)"; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

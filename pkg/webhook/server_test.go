package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/klog/v2/ktesting"
)

// pipeListener is a net.Listener of in-memory connections (net.Pipe): a server on it
// runs inside a synctest bubble, where its deadlines and timeouts are on the bubble's
// clock and a test can step past them without waiting.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

// dial returns the client's end of a new connection to the server.
func (l *pipeListener) dial(context.Context, string, string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// slowClient is one way of holding a connection without finishing a request: it sends
// head at once and then dribble, one byte a second, for as long as the server listens.
type slowClient struct {
	name           string
	head, dribble  string
	wantCutOffFrom time.Duration // the server closes the connection by then
}

// TestSlowClientsDoNotStarveReviews: more slow clients than there are review slots
// connect first and keep sending a byte a second (or nothing); an AdmissionReview sent
// after them is still answered before the API server's 5 s admission timeout, and every
// slow client is cut off within the server's read timeouts. Runs in a synctest bubble:
// the 5 s and the cut-off are on its clock, nothing waits in real time.
func TestSlowClientsDoNotStarveReviews(t *testing.T) {
	const postHead = "POST " + Path + " HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\n"
	body := review("resource.k8s.io", "v1", "ResourceClaim", "CREATE", claim("rdma.dra.io", goodConfig))
	for _, c := range []slowClient{
		{name: "body a byte a second", head: postHead + "Content-Length: 1048576\r\n\r\n", dribble: strings.Repeat(" ", 1<<20), wantCutOffFrom: ReadTimeout},
		{name: "body promised, never sent", head: postHead + "Content-Length: 1048576\r\n\r\n", wantCutOffFrom: ReadTimeout},
		{name: "chunked body a byte a second", head: postHead + "Transfer-Encoding: chunked\r\n\r\n", dribble: "100000\r\n" + strings.Repeat(" ", 1<<20), wantCutOffFrom: ReadTimeout},
		{name: "headers a byte a second", dribble: postHead, wantCutOffFrom: ReadHeaderTimeout},
		{name: "connects and says nothing", wantCutOffFrom: ReadHeaderTimeout},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				_, ctx := ktesting.NewTestContext(t)
				lis := newPipeListener()
				srv := NewServer(ctx, "", &Validator{DriverName: "rdma.dra.io"}, nil)
				served := make(chan error, 1)
				go func() { served <- srv.Serve(lis) }()
				// Closing the server hangs up on every client, so that the bubble's
				// goroutines end also when the test fails half-way; time goes on
				// while they end (a closing connection of net/http waits 500 ms).
				var clients sync.WaitGroup
				defer func() {
					if err := srv.Close(); err != nil {
						t.Errorf("close server: %v", err)
					}
					if err := <-served; !errors.Is(err, http.ErrServerClosed) {
						t.Errorf("serve: %v", err)
					}
					clients.Wait()
					time.Sleep(time.Second)
				}()

				// More slow clients than slots, all connected before the review.
				closed := make([]atomic.Bool, MaxInFlight+1)
				for i := range closed {
					conn, err := lis.dial(ctx, "", "")
					if err != nil {
						t.Fatal(err)
					}
					readDone := make(chan struct{})
					clients.Add(2)
					go func() {
						defer clients.Done()
						// Whatever the server answers, the client reads it: the connection
						// is cut off when the read ends.
						defer close(readDone)
						_, _ = io.Copy(io.Discard, conn)
						closed[i].Store(true)
					}()
					go func() {
						defer clients.Done()
						defer conn.Close()
						if _, err := io.WriteString(conn, c.head); err != nil {
							return
						}
						for _, b := range []byte(c.dribble) {
							time.Sleep(time.Second)
							if _, err := conn.Write([]byte{b}); err != nil {
								return
							}
						}
						<-readDone // then idle until the server hangs up
					}()
				}
				synctest.Wait() // every slow client is in: sending, or waiting to send

				// The API server's call: one AdmissionReview with its 5 s timeout.
				transport := &http.Transport{DialContext: lis.dial}
				defer transport.CloseIdleConnections()
				apiServer := &http.Client{Transport: transport, Timeout: 5 * time.Second}
				start := time.Now()
				resp, err := apiServer.Post("http://webhook"+Path, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatalf("review behind %d slow clients: %v (after %s of the bubble's clock)", len(closed), err, time.Since(start))
				}
				var out admissionv1.AdmissionReview
				err = json.NewDecoder(resp.Body).Decode(&out)
				_ = resp.Body.Close()
				if resp.StatusCode != http.StatusOK || err != nil || out.Response == nil || !out.Response.Allowed || out.Response.UID != "705ab4f5-6393-11e8-b7cc-42010a800002" {
					t.Fatalf("review behind slow clients: HTTP %d, %v, %+v", resp.StatusCode, err, out.Response)
				}

				// The server cut every slow client off by its read timeouts (from the
				// first byte, which they sent at the start), and the lingering of a
				// closing connection of net/http after it answered a request.
				const lingerAfterAnswer = 500 * time.Millisecond
				cutOff := c.wantCutOffFrom + lingerAfterAnswer
				time.Sleep(cutOff - time.Since(start))
				synctest.Wait()
				for i := range closed {
					if !closed[i].Load() {
						t.Errorf("slow client %d still connected after %s", i, cutOff)
					}
				}
			})
		})
	}
}

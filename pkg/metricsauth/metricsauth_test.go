package metricsauth

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
)

// Tokens the fake API server knows.
const (
	scraperToken  = "scraper-token"  // allowed to get /metrics
	strangerToken = "stranger-token" // authenticated, not allowed
	unknownToken  = "unknown-token"  // not authenticated
	brokenToken   = "broken-token"   // the TokenReview fails
)

// fakeAPI answers TokenReviews and SubjectAccessReviews the way a cluster with one
// scraper ServiceAccount bound to the metrics reader role would, and records them.
type fakeAPI struct {
	tokenReviews  []*authenticationv1.TokenReview
	accessReviews []*authorizationv1.SubjectAccessReview
	// sarErr, when set, fails every SubjectAccessReview.
	sarErr error
}

func (f *fakeAPI) client() *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		f.tokenReviews = append(f.tokenReviews, tr)
		switch tr.Spec.Token {
		case scraperToken:
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{
				Username: "system:serviceaccount:monitoring:prometheus", UID: "uid-1",
				Groups: []string{"system:serviceaccounts", "system:authenticated"},
				Extra:  map[string]authenticationv1.ExtraValue{"authentication.kubernetes.io/node-name": {"node-1"}},
			}}
		case strangerToken:
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "stranger"}}
		case brokenToken:
			return true, nil, errors.New("etcd is on fire")
		default:
			tr.Status = authenticationv1.TokenReviewStatus{Error: "token not found"}
		}
		return true, tr, nil
	})
	client.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		f.accessReviews = append(f.accessReviews, sar)
		if f.sarErr != nil {
			return true, nil, f.sarErr
		}
		na := sar.Spec.NonResourceAttributes
		sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && na != nil && na.Path == "/metrics" && na.Verb == "get"
		if !sar.Status.Allowed {
			sar.Status.Reason = "no RBAC policy matched"
		}
		return true, sar, nil
	})
	return client
}

func (f *fakeAPI) calls() int { return len(f.tokenReviews) + len(f.accessReviews) }

// nextHandler counts the requests that got through.
type nextHandler struct{ calls int }

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	n.calls++
	_, _ = w.Write([]byte("rdma_dra_up 1\n"))
}

func request(method, path, authorization string) *http.Request {
	r := httptest.NewRequest(method, path, nil)
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestHandler(t *testing.T) {
	tests := []struct {
		name          string
		method, path  string
		authorization string
		sarErr        error
		wantStatus    int
		wantNext      bool
		wantCalls     int // API requests of the first request
	}{
		{name: "no header", authorization: "", wantStatus: http.StatusUnauthorized},
		{name: "basic auth", authorization: "Basic c2NyYXBlcjpwdw==", wantStatus: http.StatusUnauthorized},
		{name: "bearer without token", authorization: "Bearer ", wantStatus: http.StatusUnauthorized},
		{name: "bearer with two words", authorization: "Bearer " + scraperToken + " extra", wantStatus: http.StatusUnauthorized},
		{name: "unauthenticated token", authorization: "Bearer " + unknownToken, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "authenticated but denied", authorization: "Bearer " + strangerToken, wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "allowed", authorization: "Bearer " + scraperToken, wantStatus: http.StatusOK, wantNext: true, wantCalls: 2},
		{name: "scheme is case-insensitive", authorization: "bearer " + scraperToken, wantStatus: http.StatusOK, wantNext: true, wantCalls: 2},
		{name: "allowed user, other path", path: "/debug/pprof/", authorization: "Bearer " + scraperToken, wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "allowed user, other verb", method: http.MethodPost, authorization: "Bearer " + scraperToken, wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "TokenReview fails", authorization: "Bearer " + brokenToken, wantStatus: http.StatusInternalServerError, wantCalls: 1},
		{name: "SubjectAccessReview fails", authorization: "Bearer " + scraperToken, sarErr: errors.New("webhook authorizer timed out"), wantStatus: http.StatusInternalServerError, wantCalls: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{sarErr: tt.sarErr}
			next := &nextHandler{}
			h := New(api.client(), next, Options{})
			method, path := tt.method, tt.path
			if method == "" {
				method = http.MethodGet
			}
			if path == "" {
				path = "/metrics"
			}
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(10), ktesting.BufferLogs(true)))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request(method, path, tt.authorization).WithContext(klog.NewContext(context.Background(), logger)))
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if logs == "" {
				t.Error("the request was not logged")
			}
			if w.Code != tt.wantStatus {
				t.Errorf("status %d, want %d", w.Code, tt.wantStatus)
			}
			if got := next.calls > 0; got != tt.wantNext {
				t.Errorf("next handler called: %v, want %v", got, tt.wantNext)
			}
			if api.calls() != tt.wantCalls {
				t.Errorf("%d API requests, want %d", api.calls(), tt.wantCalls)
			}
			if got := w.Header().Get("WWW-Authenticate"); (tt.wantStatus == http.StatusUnauthorized) != (got == "Bearer") {
				t.Errorf("WWW-Authenticate %q with status %d", got, w.Code)
			}
			for _, secret := range []string{scraperToken, strangerToken, unknownToken, brokenToken, "fire", "timed out", "RBAC"} {
				if strings.Contains(w.Body.String(), secret) {
					t.Errorf("response %q leaks %q", w.Body.String(), secret)
				}
			}
			for _, token := range []string{scraperToken, strangerToken, unknownToken, brokenToken} {
				if strings.Contains(logs, token) {
					t.Errorf("the log shows the token %q:\n%s", token, logs)
				}
			}
			for _, tr := range api.tokenReviews {
				if want := strings.Fields(tt.authorization); len(want) != 2 || tr.Spec.Token != want[1] {
					t.Errorf("TokenReview of %q, header %q", tr.Spec.Token, tt.authorization)
				}
			}
			for _, sar := range api.accessReviews {
				na := sar.Spec.NonResourceAttributes
				if na == nil || na.Path != path || na.Verb != strings.ToLower(method) || sar.Spec.ResourceAttributes != nil {
					t.Errorf("SubjectAccessReview attributes %+v, want %s %s", na, strings.ToLower(method), path)
				}
			}
		})
	}
}

// TestSubjectAccessReviewCarriesTheUser: the review asks about the token's user, with
// everything the TokenReview said about it.
func TestSubjectAccessReviewCarriesTheUser(t *testing.T) {
	api := &fakeAPI{}
	h := New(api.client(), &nextHandler{}, Options{})
	h.ServeHTTP(httptest.NewRecorder(), request(http.MethodGet, "/metrics", "Bearer "+scraperToken))
	if len(api.accessReviews) != 1 {
		t.Fatalf("%d SubjectAccessReviews, want 1", len(api.accessReviews))
	}
	spec := api.accessReviews[0].Spec
	if spec.User != "system:serviceaccount:monitoring:prometheus" || spec.UID != "uid-1" ||
		!slices.Equal(spec.Groups, []string{"system:serviceaccounts", "system:authenticated"}) ||
		!slices.Equal(spec.Extra["authentication.kubernetes.io/node-name"], authorizationv1.ExtraValue{"node-1"}) {
		t.Errorf("SubjectAccessReview spec %+v does not carry the user of the token", spec)
	}
}

// TestHandlerCaches: decisions are reused for their TTL without asking the API again,
// API errors never are, and the key is the token, the verb and the path together.
func TestHandlerCaches(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	api := &fakeAPI{}
	next := &nextHandler{}
	// A budget of unknown tokens that this test does not exhaust (TestUnknownTokenBudget).
	h := New(api.client(), next, Options{Clock: clock, AllowTTL: time.Minute, DenyTTL: 10 * time.Second, UnknownReviewBurst: 100})
	serve := func(token, path string) int {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(http.MethodGet, path, "Bearer "+token))
		return w.Code
	}
	type step struct {
		name       string
		token      string
		path       string
		advance    time.Duration
		sarErr     error
		wantStatus int
		wantCalls  int // API requests of this step
	}
	for _, s := range []step{
		{name: "allowed", token: scraperToken, wantStatus: http.StatusOK, wantCalls: 2},
		{name: "allowed, cached", token: scraperToken, advance: 59 * time.Second, wantStatus: http.StatusOK},
		{name: "same token, other path", token: scraperToken, path: "/other", wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "allowed, expired", token: scraperToken, advance: 2 * time.Second, wantStatus: http.StatusOK, wantCalls: 2},
		{name: "denied", token: strangerToken, wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "denied, cached", token: strangerToken, advance: 9 * time.Second, wantStatus: http.StatusForbidden},
		{name: "denied, expired", token: strangerToken, advance: 2 * time.Second, wantStatus: http.StatusForbidden, wantCalls: 2},
		{name: "unauthenticated", token: unknownToken, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "unauthenticated, cached", token: unknownToken, wantStatus: http.StatusUnauthorized},
		{name: "TokenReview error", token: brokenToken, wantStatus: http.StatusInternalServerError, wantCalls: 1},
		{name: "TokenReview error is not cached", token: brokenToken, wantStatus: http.StatusInternalServerError, wantCalls: 1},
		{name: "SubjectAccessReview error", token: scraperToken, advance: 2 * time.Minute, sarErr: errors.New("boom"), wantStatus: http.StatusInternalServerError, wantCalls: 2},
		{name: "SubjectAccessReview error is not cached", token: scraperToken, wantStatus: http.StatusOK, wantCalls: 2},
	} {
		clock.Step(s.advance)
		api.sarErr = s.sarErr
		before := api.calls()
		path := s.path
		if path == "" {
			path = "/metrics"
		}
		if got := serve(s.token, path); got != s.wantStatus {
			t.Errorf("%s: status %d, want %d", s.name, got, s.wantStatus)
		}
		if got := api.calls() - before; got != s.wantCalls {
			t.Errorf("%s: %d API requests, want %d", s.name, got, s.wantCalls)
		}
	}
	if next.calls != 4 {
		t.Errorf("next handler called %d times, want 4 (every allowed request)", next.calls)
	}
}

// TestUnknownTokenBudget: reviews of tokens not known to be allowed take from a budget
// of their own and are answered 429 without a review beyond it; a cached decision needs
// no budget, a token allowed within KnownTTL is reviewed again outside it, and refusals,
// however many, never push an allowed decision out of the cache.
func TestUnknownTokenBudget(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Now())
	api := &fakeAPI{}
	h := New(api.client(), &nextHandler{}, Options{Clock: clock, CacheSize: 2, AllowTTL: time.Minute, DenyTTL: 10 * time.Second,
		KnownTTL: 10 * time.Minute, UnknownReviewQPS: 1, UnknownReviewBurst: 2})
	for _, s := range []struct {
		name       string
		token      string
		advance    time.Duration
		wantStatus int
		wantCalls  int // API requests of this step
	}{
		{name: "new scraper", token: scraperToken, wantStatus: http.StatusOK, wantCalls: 2},
		{name: "made-up token", token: "made-up-1", wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "made-up token beyond the budget", token: "made-up-2", wantStatus: http.StatusTooManyRequests},
		{name: "cached refusal needs no budget", token: "made-up-1", wantStatus: http.StatusUnauthorized},
		{name: "cached scraper needs no budget", token: scraperToken, wantStatus: http.StatusOK},
		{name: "budget back a second later", token: "made-up-3", advance: time.Second, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "made-up token beyond the budget again", token: "made-up-4", wantStatus: http.StatusTooManyRequests},
		{name: "not allowed, beyond the budget", token: strangerToken, wantStatus: http.StatusTooManyRequests},
		{name: "more refusals than the cache holds", token: "made-up-5", advance: 2 * time.Second, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "scraper cached after them", token: scraperToken, wantStatus: http.StatusOK},
		{name: "a minute on, a made-up token takes from the budget", token: "made-up-6", advance: time.Minute, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "another takes the rest", token: "made-up-7", wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "scraper's decision expired: reviewed outside the budget", token: scraperToken, wantStatus: http.StatusOK, wantCalls: 2},
		{name: "after KnownTTL, a made-up token takes from the budget", token: "made-up-8", advance: 11 * time.Minute, wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "another takes the rest again", token: "made-up-9", wantStatus: http.StatusUnauthorized, wantCalls: 1},
		{name: "scraper not known after KnownTTL: waits for the budget", token: scraperToken, wantStatus: http.StatusTooManyRequests},
	} {
		clock.Step(s.advance)
		before := api.calls()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, request(http.MethodGet, "/metrics", "Bearer "+s.token))
		if w.Code != s.wantStatus {
			t.Errorf("%s: status %d, want %d", s.name, w.Code, s.wantStatus)
		}
		if got := api.calls() - before; got != s.wantCalls {
			t.Errorf("%s: %d API requests, want %d", s.name, got, s.wantCalls)
		}
		if got := w.Header().Get("Retry-After"); (w.Code == http.StatusTooManyRequests) != (got != "") {
			t.Errorf("%s: Retry-After %q with status %d", s.name, got, w.Code)
		}
	}
}

func TestCacheKeyHidesTheToken(t *testing.T) {
	key := cacheKey(scraperToken, "get", "/metrics")
	if strings.Contains(key, scraperToken) {
		t.Errorf("cache key %q contains the token", key)
	}
	if key == cacheKey(scraperToken, "get", "/other") || key == cacheKey(scraperToken, "post", "/metrics") || key == cacheKey(strangerToken, "get", "/metrics") {
		t.Error("cache keys of different requests are equal")
	}
}

// FuzzBearerToken: the Authorization header is outside input; a token that is accepted
// is one non-empty word of the header after a Bearer scheme.
func FuzzBearerToken(f *testing.F) {
	for _, seed := range []string{"", "Bearer abc", "bearer  abc ", "Basic abc", "Bearer", "Bearer a b", "Bearer\tabc", "BEARER x.y.z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, header string) {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		r.Header["Authorization"] = []string{header}
		token, ok := bearerToken(r)
		if !ok {
			if token != "" {
				t.Errorf("refused header %q returned token %q", header, token)
			}
			return
		}
		if token == "" || strings.ContainsAny(token, " \t") || !strings.Contains(header, token) ||
			!strings.EqualFold(strings.Fields(header)[0], "bearer") {
			t.Errorf("header %q gave token %q", header, token)
		}
	})
}

package metricsauth

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// throttledAPI answers reviews as fakeAPI does, behind the client-side rate limit the
// binaries give the review client (ClientQPS, ClientBurst), waiting as client-go's
// token bucket does: with the request's context, failing at once when the wait would
// outlast its deadline. It counts the reviews of every token.
type throttledAPI struct {
	limiter *rate.Limiter

	mu            sync.Mutex
	tokenReviews  map[string]int
	accessReviews int
}

func newThrottledAPI() *throttledAPI {
	return &throttledAPI{limiter: rate.NewLimiter(ClientQPS, ClientBurst), tokenReviews: map[string]int{}}
}

// install makes h send its reviews to the throttled API.
func (a *throttledAPI) install(h *Handler) {
	h.tokenReviews, h.accessReviews = throttledTokenReviews{a}, throttledAccessReviews{a}
}

func (a *throttledAPI) reviewsOf(token string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.tokenReviews[token]
}

type throttledTokenReviews struct{ *throttledAPI }

func (a throttledTokenReviews) Create(ctx context.Context, tr *authenticationv1.TokenReview, _ metav1.CreateOptions) (*authenticationv1.TokenReview, error) {
	if err := a.limiter.Wait(ctx); err != nil {
		return nil, fmt.Errorf("client rate limiter Wait returned an error: %w", err)
	}
	a.mu.Lock()
	a.tokenReviews[tr.Spec.Token]++
	a.mu.Unlock()
	tr = tr.DeepCopy()
	if tr.Spec.Token == scraperToken {
		tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
	} else {
		tr.Status = authenticationv1.TokenReviewStatus{Error: "token not found"}
	}
	return tr, nil
}

type throttledAccessReviews struct{ *throttledAPI }

func (a throttledAccessReviews) Create(ctx context.Context, sar *authorizationv1.SubjectAccessReview, _ metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error) {
	if err := a.limiter.Wait(ctx); err != nil {
		return nil, fmt.Errorf("client rate limiter Wait returned an error: %w", err)
	}
	a.mu.Lock()
	a.accessReviews++
	a.mu.Unlock()
	sar = sar.DeepCopy()
	sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus"
	return sar, nil
}

// TestFloodOfMadeUpTokensDoesNotStarveTheScraper: while clients send made-up bearer
// tokens, each a new one, far faster than the review client's rate limit, the scraper,
// whose token was allowed before the flood began, gets every scrape answered 200 and
// costs no more reviews than its decision's TTL asks for; the made-up tokens get 401 or
// 429, never the 500 of a review that could not be made, and cost at most the budget of
// reviews of unknown tokens. In a synctest bubble: five minutes of scraping and flooding
// on its clock.
func TestFloodOfMadeUpTokensDoesNotStarveTheScraper(t *testing.T) {
	const (
		floodEvery = 10 * time.Millisecond // a new made-up token, without waiting for the last
		scrapeEach = 30 * time.Second
		duration   = 5 * time.Minute
	)
	synctest.Test(t, func(t *testing.T) {
		api := newThrottledAPI()
		next := &nextHandler{}
		h := New(fake.NewClientset(), next, Options{})
		api.install(h)
		serve := func(token string) int {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, request(http.MethodGet, "/metrics", "Bearer "+token))
			return w.Code
		}
		if code := serve(scraperToken); code != http.StatusOK {
			t.Fatalf("scrape before the flood: HTTP %d", code)
		}
		start := time.Now()

		// The flood: a request with a new made-up token every floodEvery, each in a
		// goroutine of its own, as many in flight as the handler keeps waiting.
		stop := make(chan struct{})
		var (
			flood    sync.WaitGroup
			mu       sync.Mutex
			statuses = map[int]int{}
			madeUp   int
		)
		flood.Go(func() {
			for i := 0; ; i++ {
				flood.Go(func() {
					code := serve(fmt.Sprintf("made-up-%d", i))
					mu.Lock()
					statuses[code]++
					madeUp++
					mu.Unlock()
				})
				select {
				case <-stop:
					return
				case <-time.After(floodEvery):
				}
			}
		})
		for elapsed := scrapeEach; elapsed <= duration; elapsed += scrapeEach {
			time.Sleep(scrapeEach)
			if code := serve(scraperToken); code != http.StatusOK {
				t.Errorf("scrape at %s of the flood: HTTP %d", elapsed, code)
			}
		}
		close(stop)
		flood.Wait()

		elapsed := time.Since(start)
		if scrapes := 1 + int(duration/scrapeEach); next.calls != scrapes {
			t.Errorf("%d of %d scrapes served", next.calls, scrapes)
		}
		if got, most := api.reviewsOf(scraperToken), 1+int(elapsed/DefaultAllowTTL); got > most {
			t.Errorf("%d TokenReviews of the scraper's token in %s, want at most %d (one per %s)", got, elapsed, most, DefaultAllowTTL)
		}
		var madeUpReviews int
		api.mu.Lock()
		for token, n := range api.tokenReviews {
			if token != scraperToken {
				madeUpReviews += n
			}
		}
		api.mu.Unlock()
		if madeUp < 10*ClientQPS*int(elapsed.Seconds()) {
			t.Fatalf("%d made-up tokens in %s: not a flood for a client of %d requests a second", madeUp, elapsed, ClientQPS)
		}
		if statuses[http.StatusUnauthorized]+statuses[http.StatusTooManyRequests] != madeUp {
			t.Errorf("made-up tokens answered %v, want only 401 and 429", statuses)
		}
		if most := UnknownReviewBurst + int(UnknownReviewQPS*elapsed.Seconds()); madeUpReviews > most {
			t.Errorf("%d TokenReviews of %d made-up tokens in %s, want at most %d", madeUpReviews, madeUp, elapsed, most)
		}
		t.Logf("%d made-up tokens in %s: %v, %d reviewed", madeUp, elapsed, statuses, madeUpReviews)
	})
}

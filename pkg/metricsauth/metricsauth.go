// Package metricsauth protects an HTTP endpoint such as /metrics the way the Kubernetes
// components do (controller-runtime's and component-base's secure serving): the caller's
// bearer token is authenticated with a TokenReview and the request is authorized with a
// SubjectAccessReview of its non-resource URL, so a scraper needs a token that RBAC allows
// to `get` the path, and the endpoint may listen on every address.
//
// It calls the two review APIs through client-go's typed clients instead of k8s.io/apiserver's
// delegating authenticator and authorizer: those would add about 180 packages to the kubelet
// plugin, whose idle memory is benchmarked, for the same two requests. For the same reason
// its caches are apimachinery's LRUExpireCache rather than the apiserver's token cache,
// and its budget of reviews is golang.org/x/time/rate, which client-go uses already.
package metricsauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of Options. Allowed decisions are kept longer than denied ones, as in the
// API server's webhook authorizer, so that a new RoleBinding takes effect quickly while a
// scraper every 30 seconds costs at most two reviews a minute.
const (
	DefaultCacheSize = 1024
	DefaultAllowTTL  = time.Minute
	DefaultDenyTTL   = 10 * time.Second
	// DefaultKnownTTL is how long a token stays known to be allowed after its last
	// allowed decision: a scraper that keeps scraping stays known for good, and one that
	// pauses for a while (a Prometheus restart) still is when it comes back.
	DefaultKnownTTL = 10 * time.Minute
	// ReviewTimeout bounds the two reviews of one request.
	ReviewTimeout = 10 * time.Second
)

// ClientQPS and ClientBurst are the client-side rate limit the binaries give the client
// of the reviews. It is a client of its own: every made-up token misses the cache and
// costs a TokenReview, and those must not use up the budget that preparing claims or
// reconciling pools needs.
const (
	ClientQPS   = 5
	ClientBurst = 10
)

// UnknownReviewQPS and UnknownReviewBurst are the default budget of reviews of tokens
// not known to be allowed (made-up, expired, not allowed, or a scraper's new one). Each
// such review costs the client up to two requests, so the budget takes at most 2 of its
// ClientQPS a second and 6 of its ClientBurst: the reviews of known tokens always find
// room, and made-up tokens beyond the budget are refused without a review.
const (
	UnknownReviewQPS   = 1
	UnknownReviewBurst = 3
)

// Options tune a Handler; zero fields take the defaults.
type Options struct {
	// CacheSize bounds the number of cached allowed decisions and, apart, that of
	// refused ones (least recently used go first), so that refusals, which anyone can
	// cause, never push out an allowed decision.
	CacheSize int
	// AllowTTL and DenyTTL are how long an allowed and a refused (unauthenticated or
	// forbidden) decision is reused. Errors of the API are never cached.
	AllowTTL, DenyTTL time.Duration
	// KnownTTL is how long after its last allowed decision a token is reviewed again
	// outside the budget of unknown tokens; at least AllowTTL.
	KnownTTL time.Duration
	// UnknownReviewQPS and UnknownReviewBurst are the budget of reviews of tokens that
	// are not known to be allowed; a request beyond it is answered 429.
	UnknownReviewQPS   float64
	UnknownReviewBurst int
	// Clock is for tests.
	Clock clock.PassiveClock
}

// Handler authenticates and authorizes every request before it passes it to the next
// handler. Missing or invalid token: 401 with `WWW-Authenticate: Bearer`; not allowed:
// 403; a token that needs a review beyond the budget of unknown tokens: 429 with
// `Retry-After`; the API failed: 500, with nothing of the error in the response.
//
// A token whose allowed decision is cached is served without a review. Reviews of other
// tokens take from a budget of their own (Options.UnknownReviewQPS), except those of
// tokens allowed within KnownTTL, so a flood of made-up tokens gets 429s while a
// known scraper is reviewed again whenever its decision expires.
type Handler struct {
	next          http.Handler
	tokenReviews  authenticationv1client.TokenReviewInterface
	accessReviews authorizationv1client.SubjectAccessReviewInterface
	// allowed holds allowedEntry for KnownTTL; refused holds decision for DenyTTL.
	allowed, refused *cache.LRUExpireCache
	unknown          *rate.Limiter
	clock            clock.PassiveClock
	allowTTL         time.Duration
	denyTTL          time.Duration
	knownTTL         time.Duration
}

// New wraps next with authentication and authorization through client's review APIs.
// The client's identity needs the built-in ClusterRole system:auth-delegator.
func New(client kubernetes.Interface, next http.Handler, opts Options) *Handler {
	if opts.CacheSize <= 0 {
		opts.CacheSize = DefaultCacheSize
	}
	if opts.AllowTTL <= 0 {
		opts.AllowTTL = DefaultAllowTTL
	}
	if opts.DenyTTL <= 0 {
		opts.DenyTTL = DefaultDenyTTL
	}
	if opts.KnownTTL <= 0 {
		opts.KnownTTL = DefaultKnownTTL
	}
	opts.KnownTTL = max(opts.KnownTTL, opts.AllowTTL)
	if opts.UnknownReviewQPS <= 0 {
		opts.UnknownReviewQPS = UnknownReviewQPS
	}
	if opts.UnknownReviewBurst <= 0 {
		opts.UnknownReviewBurst = UnknownReviewBurst
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Handler{
		next:          next,
		tokenReviews:  client.AuthenticationV1().TokenReviews(),
		accessReviews: client.AuthorizationV1().SubjectAccessReviews(),
		allowed:       cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock),
		refused:       cache.NewLRUExpireCacheWithClock(opts.CacheSize, opts.Clock),
		unknown:       rate.NewLimiter(rate.Limit(opts.UnknownReviewQPS), opts.UnknownReviewBurst),
		clock:         opts.Clock,
		allowTTL:      opts.AllowTTL,
		denyTTL:       opts.DenyTTL,
		knownTTL:      opts.KnownTTL,
	}
}

// decision is what a review said; the user is kept for the log.
type decision struct {
	status int // http.StatusOK, StatusUnauthorized or StatusForbidden
	user   string
	reason string
}

// allowedEntry is a cached allowed decision: reused until expires, and after that the
// token is still known to have been allowed until the cache drops it (KnownTTL).
type allowedEntry struct {
	decision
	expires time.Time
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	verb := strings.ToLower(r.Method)
	logger := klog.FromContext(r.Context()).WithValues("path", r.URL.Path, "verb", verb, "remoteAddr", r.RemoteAddr)
	token, ok := bearerToken(r)
	if !ok {
		logger.V(1).Info("Refused a request without a bearer token")
		unauthorized(w)
		return
	}
	key := cacheKey(token, verb, r.URL.Path)
	d, cached, known := h.lookup(key)
	if !cached {
		// The budget is taken before the review and not given back: a refusal costs
		// the API server as much as an allowed decision.
		if !known && !h.unknown.AllowN(h.clock.Now(), 1) {
			logger.V(1).Info("Refused a request: too many reviews of unknown tokens")
			w.Header().Set("Retry-After", "1")
			http.Error(w, http.StatusText(http.StatusTooManyRequests), http.StatusTooManyRequests)
			return
		}
		var err error
		if d, err = h.review(r.Context(), token, verb, r.URL.Path); err != nil {
			logger.Error(err, "Could not authenticate or authorize a request", "known", known)
			http.Error(w, http.StatusText(http.StatusInternalServerError), http.StatusInternalServerError)
			return
		}
		h.remember(key, d)
	}
	switch d.status {
	case http.StatusOK:
		logger.V(5).Info("Allowed a request", "user", d.user, "cached", cached)
		h.next.ServeHTTP(w, r)
	case http.StatusUnauthorized:
		logger.V(1).Info("Refused a request with an invalid token", "reason", d.reason, "cached", cached)
		unauthorized(w)
	default:
		logger.V(1).Info("Refused a request that is not allowed", "user", d.user, "reason", d.reason, "cached", cached)
		http.Error(w, http.StatusText(http.StatusForbidden), http.StatusForbidden)
	}
}

// lookup returns the cached decision of key, if there is one to reuse, and whether
// its token was allowed within KnownTTL.
func (h *Handler) lookup(key string) (d decision, cached, known bool) {
	if v, ok := h.allowed.Get(key); ok {
		e := v.(allowedEntry)
		if !h.clock.Now().After(e.expires) {
			return e.decision, true, true
		}
		known = true
	}
	if v, ok := h.refused.Get(key); ok {
		return v.(decision), true, known
	}
	return decision{}, false, known
}

// remember caches d for key. A refusal ends what the token was known for: it is an
// unknown token again once the refusal expires.
func (h *Handler) remember(key string, d decision) {
	if d.status == http.StatusOK {
		h.refused.Remove(key)
		h.allowed.Add(key, allowedEntry{decision: d, expires: h.clock.Now().Add(h.allowTTL)}, h.knownTTL)
		return
	}
	h.allowed.Remove(key)
	h.refused.Add(key, d, h.denyTTL)
}

// review asks the API server who the token is and whether that user may use verb on
// path. An error is the API's, never a refusal.
func (h *Handler) review(ctx context.Context, token, verb, path string) (decision, error) {
	ctx, cancel := context.WithTimeout(ctx, ReviewTimeout)
	defer cancel()
	tr, err := h.tokenReviews.Create(ctx, &authenticationv1.TokenReview{
		Spec: authenticationv1.TokenReviewSpec{Token: token},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("create TokenReview: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{status: http.StatusUnauthorized, reason: tr.Status.Error}, nil
	}
	user := tr.Status.User
	var extra map[string]authorizationv1.ExtraValue
	if len(user.Extra) > 0 {
		extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	sar, err := h.accessReviews.Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("create SubjectAccessReview: %w", err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		reason := sar.Status.Reason
		if sar.Status.EvaluationError != "" {
			reason = strings.TrimSpace(reason + " " + sar.Status.EvaluationError)
		}
		return decision{status: http.StatusForbidden, user: user.Username, reason: reason}, nil
	}
	return decision{status: http.StatusOK, user: user.Username}, nil
}

// bearerToken returns the token of an `Authorization: Bearer <token>` header, parsed as
// the API server does (the scheme is case-insensitive, the token is one word).
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(strings.TrimSpace(r.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	if token == "" || strings.ContainsAny(token, " \t") {
		return "", false
	}
	return token, true
}

// cacheKey identifies a decision without keeping the token in memory.
func cacheKey(token, verb, path string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:]) + " " + verb + " " + path
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	http.Error(w, http.StatusText(http.StatusUnauthorized), http.StatusUnauthorized)
}

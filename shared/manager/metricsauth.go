package manager

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	authenticationclient "k8s.io/client-go/kubernetes/typed/authentication/v1"
	authorizationclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint asks the API server who a caller is (TokenReview) and whether it may
// read the URL (SubjectAccessReview), as controller-runtime's
// filters.WithAuthenticationAndAuthorization does, with its cache lifetimes. That filter
// links k8s.io/apiserver (its delegating authenticator and authorizer) into every operator
// binary; these two reviews need only client-go.
const (
	// tokenTTL is how long a token's review is kept, authenticated or not.
	tokenTTL = time.Minute
	// allowTTL and denyTTL are how long an access decision is kept.
	allowTTL = 5 * time.Minute
	denyTTL  = 30 * time.Second
	// reviewTimeout bounds each review the API server is asked for.
	reviewTimeout = 10 * time.Second
	// decisionCacheSize bounds each cache (least recently used out first): scrapers are
	// few, and a caller sending many made-up tokens costs reviews, not memory.
	decisionCacheSize = 1024
)

// tokenReviewer and accessReviewer are what the filter needs of the API server: client-go's
// TokenReviewInterface and SubjectAccessReviewInterface.
type tokenReviewer interface {
	Create(ctx context.Context, review *authenticationv1.TokenReview, opts metav1.CreateOptions) (*authenticationv1.TokenReview, error)
}

type accessReviewer interface {
	Create(ctx context.Context, review *authorizationv1.SubjectAccessReview, opts metav1.CreateOptions) (*authorizationv1.SubjectAccessReview, error)
}

// metricsAuth authenticates a metrics request's bearer token and authorizes its verb on its
// URL path, caching both answers.
type metricsAuth struct {
	tokens  tokenReviewer
	access  accessReviewer
	users   *cache.LRUExpireCache // keyed token hash -> *authenticationv1.UserInfo; nil: not authenticated
	allowed *cache.LRUExpireCache // keyed SubjectAccessReviewSpec JSON -> bool
	hashKey []byte                // keys the token hash, so the cache holds nothing a token can be checked against
}

func newMetricsAuth(tokens tokenReviewer, access accessReviewer, now cache.Clock, size int) *metricsAuth {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24+).
	return &metricsAuth{
		tokens:  tokens,
		access:  access,
		users:   cache.NewLRUExpireCacheWithClock(size, now),
		allowed: cache.NewLRUExpireCacheWithClock(size, now),
		hashKey: key,
	}
}

// metricsFilter is the metrics server's FilterProvider: it reviews through the manager's
// own REST config and HTTP client. The operator's ClusterRole needs create on
// authentication.k8s.io tokenreviews and authorization.k8s.io subjectaccessreviews; a
// scraper needs get on the nonResourceURL /metrics.
func metricsFilter(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	authn, err := authenticationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the TokenReview client: %w", err)
	}
	authz, err := authorizationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("creating the SubjectAccessReview client: %w", err)
	}
	a := newMetricsAuth(authn.TokenReviews(), authz.SubjectAccessReviews(), clock.RealClock{}, decisionCacheSize)
	return a.filter, nil
}

// filter wraps handler: 401 without a bearer token or with one the API server does not
// authenticate, 403 when the caller may not use the method on the path, 500 when the API
// server could not be asked. (controller-runtime's filter answers 500 to a token the API
// server rejects; a rejected credential is a 401.)
func (a *metricsAuth) filter(log logr.Logger, handler http.Handler) (http.Handler, error) {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		token := bearerToken(req)
		if token == "" {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		user, err := a.authenticate(req.Context(), token)
		if err != nil {
			log.Error(err, "Metrics request not authenticated: TokenReview failed")
			http.Error(w, "Authentication failed", http.StatusInternalServerError)
			return
		}
		if user == nil {
			log.V(4).Info("Metrics request not authenticated: the API server rejected the token")
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		allowed, err := a.authorize(req.Context(), user, strings.ToLower(req.Method), req.URL.Path)
		if err != nil {
			log.Error(err, "Metrics request not authorized: SubjectAccessReview failed", "user", user.Username)
			http.Error(w, fmt.Sprintf("Authorization for user %s failed", user.Username), http.StatusInternalServerError)
			return
		}
		if !allowed {
			log.V(4).Info("Metrics request denied", "user", user.Username, "verb", strings.ToLower(req.Method), "path", req.URL.Path)
			http.Error(w, fmt.Sprintf("Authorization denied for user %s", user.Username), http.StatusForbidden)
			return
		}
		// The token has done its work; nothing behind the filter should see it.
		req.Header.Del("Authorization")
		handler.ServeHTTP(w, req)
	}), nil
}

// bearerToken is the token of an "Authorization: Bearer <token>" header, or "".
func bearerToken(req *http.Request) string {
	scheme, token, ok := strings.Cut(strings.TrimSpace(req.Header.Get("Authorization")), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.Contains(token, " ") {
		return ""
	}
	return token
}

// authenticate returns the token's user, nil when the API server does not authenticate it,
// or the error that kept it from answering (not cached: the next scrape asks again).
func (a *metricsAuth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	mac := hmac.New(sha256.New, a.hashKey)
	mac.Write([]byte(token))
	key := string(mac.Sum(nil))
	if v, ok := a.users.Get(key); ok {
		return v.(*authenticationv1.UserInfo), nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := a.tokens.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var user *authenticationv1.UserInfo
	if review.Status.Authenticated {
		user = review.Status.User.DeepCopy()
		// Every authenticated caller is in system:authenticated, which RBAC bindings may name
		// (the API server's own request authenticator adds it the same way).
		if !slices.Contains(user.Groups, "system:authenticated") {
			user.Groups = append(user.Groups, "system:authenticated")
		}
	}
	a.users.Add(key, user, tokenTTL)
	return user, nil
}

// authorize asks whether user may use verb on the non-resource URL path.
func (a *metricsAuth) authorize(ctx context.Context, user *authenticationv1.UserInfo, verb, path string) (bool, error) {
	spec := authorizationv1.SubjectAccessReviewSpec{
		User:                  user.Username,
		UID:                   user.UID,
		Groups:                user.Groups,
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
	}
	if len(user.Extra) > 0 {
		spec.Extra = make(map[string]authorizationv1.ExtraValue, len(user.Extra))
		for k, v := range user.Extra {
			spec.Extra[k] = authorizationv1.ExtraValue(v)
		}
	}
	raw, err := json.Marshal(spec) // map keys sorted: equal specs, equal keys
	if err != nil {
		return false, err
	}
	key := string(raw)
	if v, ok := a.allowed.Get(key); ok {
		return v.(bool), nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := a.access.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	allowed := review.Status.Allowed && !review.Status.Denied
	ttl := denyTTL
	if allowed {
		ttl = allowTTL
	}
	a.allowed.Add(key, allowed, ttl)
	return allowed, nil
}

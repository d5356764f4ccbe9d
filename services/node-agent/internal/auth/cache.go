package auth

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// CacheConfig bounds how long and how many review results are remembered.
type CacheConfig struct {
	// Allowed is how long a successful review (an authenticated token, an allowed access) is
	// reused; a token's own expiry shortens it. Default 10s.
	Allowed time.Duration
	// Denied is how long a refusal is reused, so a flood of one bad token costs one review.
	// Default 5s.
	Denied time.Duration
	// Size is the most entries kept; the least recently used goes first. Default 4096.
	Size int
}

func (c CacheConfig) withDefaults() CacheConfig {
	if c.Allowed <= 0 {
		c.Allowed = 10 * time.Second
	}
	if c.Denied <= 0 {
		c.Denied = 5 * time.Second
	}
	if c.Size <= 0 {
		c.Size = 4096
	}
	return c
}

// ttlCache is a size-bounded LRU whose entries also expire. Keys are hashes, so a token never
// sits in memory longer than the call that carried it.
type ttlCache[V any] struct {
	mu    sync.Mutex
	size  int
	order *list.List // front: most recently used
	items map[[32]byte]*list.Element
}

type ttlEntry[V any] struct {
	key     [32]byte
	val     V
	expires time.Time
}

func newTTLCache[V any](size int) *ttlCache[V] {
	return &ttlCache[V]{size: size, order: list.New(), items: map[[32]byte]*list.Element{}}
}

func (c *ttlCache[V]) get(key [32]byte, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*ttlEntry[V])
	if !now.Before(e.expires) {
		c.order.Remove(el)
		delete(c.items, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

func (c *ttlCache[V]) put(key [32]byte, val V, expires time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		e := el.Value.(*ttlEntry[V])
		e.val, e.expires = val, expires
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&ttlEntry[V]{key: key, val: val, expires: expires})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*ttlEntry[V]).key)
	}
}

// CachedAuthenticator sits in front of the TokenReview authenticator. It refuses, without
// asking the apiserver, what cannot be a token for this agent: with a Verifier, anything the
// apiserver's issuer did not sign for this agent; without one, only what its unverified
// claims say is not for this agent (not a JWT, another audience, expired). It remembers review
// results, positive and negative, by the token's SHA-256, so floods of one token cost nothing
// after the first review.
type CachedAuthenticator struct {
	next     Authenticator
	audience string
	verifier *Verifier
	cfg      CacheConfig
	cache    *ttlCache[authResult]
	// known holds the tokens a review accepted, until they expire: longer than the cache,
	// which must ask again soon in case the token was revoked.
	known *ttlCache[struct{}]
	// Now is the clock; tests move it.
	Now func() time.Time

	// inflight joins concurrent calls with one token to one review.
	mu       sync.Mutex
	inflight map[[32]byte]*review
}

type review struct {
	done chan struct{}
	res  authResult
}

type authResult struct {
	id  Identity
	err error
}

// NewCachedAuthenticator caches next, which reviews tokens for audience, refusing early only
// on unverified claims.
func NewCachedAuthenticator(next Authenticator, audience string, cfg CacheConfig) *CachedAuthenticator {
	cfg = cfg.withDefaults()
	return &CachedAuthenticator{next: next, audience: audience, cfg: cfg, cache: newTTLCache[authResult](cfg.Size),
		known: newTTLCache[struct{}](cfg.Size), Now: time.Now}
}

// NewVerifiedAuthenticator caches next and asks it only about tokens v verifies (signed by
// the apiserver's issuer for v.Audience, valid now): a forged token costs no apiserver call.
// Local refusals are not cached, so distinct forged tokens cannot evict real callers' entries.
func NewVerifiedAuthenticator(next Authenticator, v *Verifier, cfg CacheConfig) *CachedAuthenticator {
	c := NewCachedAuthenticator(next, v.Audience, cfg)
	c.verifier = v
	return c
}

// Prefetch fetches the issuer keys now, so the first caller does not wait for them and a
// missing permission shows at start; without a Verifier it does nothing.
func (c *CachedAuthenticator) Prefetch(ctx context.Context) error {
	if c.verifier == nil {
		return nil
	}
	return c.verifier.Refresh(ctx)
}

// Known says whether a review accepted token during its lifetime, so the per-peer limit
// never holds back a caller that already proved who it is, even from an address shared with
// a flood. A revoked token stays known but each of its reviews is refused and cached as such.
func (c *CachedAuthenticator) Known(token string) bool {
	_, ok := c.known.get(sha256.Sum256([]byte(token)), c.Now())
	return ok
}

// precheck refuses what cannot be a token for this agent and returns its expiry (Unix
// seconds, 0 if none).
func (c *CachedAuthenticator) precheck(ctx context.Context, token string, now time.Time) (int64, error) {
	if c.verifier != nil {
		claims, err := c.verifier.Verify(ctx, token)
		return claims.Expiry, err
	}
	claims, err := unverifiedClaims(token)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	if !slices.Contains(claims.Audience, c.audience) {
		return 0, fmt.Errorf("%w: its audience is not %s", ErrUnauthenticated, c.audience)
	}
	if claims.Expiry != 0 && !now.Before(time.Unix(claims.Expiry, 0)) {
		return 0, fmt.Errorf("%w: it has expired", ErrUnauthenticated)
	}
	return claims.Expiry, nil
}

// Authenticate implements Authenticator.
func (c *CachedAuthenticator) Authenticate(ctx context.Context, token string) (Identity, error) {
	now := c.Now()
	// The cache first: its entries never outlive the token.
	key := sha256.Sum256([]byte(token))
	if r, ok := c.cache.get(key, now); ok {
		return r.id, r.err
	}
	expiry, err := c.precheck(ctx, token, now)
	if err != nil {
		return Identity{}, err
	}
	c.mu.Lock()
	if r, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-r.done:
			return r.res.id, r.res.err
		case <-ctx.Done():
			return Identity{}, ctx.Err()
		}
	}
	r := &review{done: make(chan struct{})}
	if c.inflight == nil {
		c.inflight = map[[32]byte]*review{}
	}
	c.inflight[key] = r
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.inflight, key)
		c.mu.Unlock()
		close(r.done)
	}()

	id, err := c.next.Authenticate(ctx, token)
	r.res = authResult{id: id, err: err}
	switch {
	case err == nil:
		expires := now.Add(c.cfg.Allowed)
		if expiry != 0 && time.Unix(expiry, 0).Before(expires) {
			expires = time.Unix(expiry, 0)
		}
		c.cache.put(key, authResult{id: id}, expires)
		if expiry != 0 {
			c.known.put(key, struct{}{}, time.Unix(expiry, 0))
		} else {
			c.known.put(key, struct{}{}, expires)
		}
	case errors.Is(err, ErrUnauthenticated):
		c.cache.put(key, authResult{err: err}, now.Add(c.cfg.Denied))
	}
	// Other errors (the apiserver unreachable) are not answers and are not remembered.
	return id, err
}

// jwtClaims are the claims the agent reads before a review, to refuse early.
type jwtClaims struct {
	Audience audiences `json:"aud"`
	Expiry   int64     `json:"exp"`
}

// audiences is a JWT "aud": one string or a list.
type audiences []string

func (a *audiences) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*a = audiences{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return err
	}
	*a = many
	return nil
}

// unverifiedClaims decodes a JWT's payload without checking its signature: only the
// apiserver's review can accept a token; these claims only let the agent refuse one.
func unverifiedClaims(token string) (jwtClaims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return jwtClaims{}, errors.New("it is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return jwtClaims{}, errors.New("its payload is not base64url")
	}
	var c jwtClaims
	if err := json.Unmarshal(payload, &c); err != nil {
		return jwtClaims{}, errors.New("its claims are not JSON")
	}
	return c, nil
}

// CachedAuthorizer remembers access decisions briefly: a controller calls several methods in a
// row, and RBAC changes may take that long to reach the agent.
type CachedAuthorizer struct {
	next  Authorizer
	cfg   CacheConfig
	cache *ttlCache[authzResult]
	// Now is the clock; tests move it.
	Now func() time.Time
}

type authzResult struct {
	allowed bool
	reason  string
}

// NewCachedAuthorizer caches next.
func NewCachedAuthorizer(next Authorizer, cfg CacheConfig) *CachedAuthorizer {
	cfg = cfg.withDefaults()
	return &CachedAuthorizer{next: next, cfg: cfg, cache: newTTLCache[authzResult](cfg.Size), Now: time.Now}
}

// Authorize implements Authorizer.
func (c *CachedAuthorizer) Authorize(ctx context.Context, id Identity, a Attributes) (bool, string, error) {
	now := c.Now()
	key := decisionKey(id, a)
	if r, ok := c.cache.get(key, now); ok {
		return r.allowed, r.reason, nil
	}
	allowed, reason, err := c.next.Authorize(ctx, id, a)
	if err != nil {
		return false, "", err
	}
	ttl := c.cfg.Denied
	if allowed {
		ttl = c.cfg.Allowed
	}
	c.cache.put(key, authzResult{allowed: allowed, reason: reason}, now.Add(ttl))
	return allowed, reason, nil
}

// decisionKey hashes everything a SubjectAccessReview is asked, unambiguously (JSON encodes
// map keys sorted).
func decisionKey(id Identity, a Attributes) [32]byte {
	groups := slices.Clone(id.Groups)
	slices.Sort(groups)
	b, _ := json.Marshal([]any{id.User, id.UID, groups, id.Extra, a.Verb, a.Subresource})
	return sha256.Sum256(b)
}

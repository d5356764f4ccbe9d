package auth

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"
)

// KeySource fetches the apiserver's service-account issuer and the public keys it signs
// tokens with (its /.well-known/openid-configuration and /openid/v1/jwks).
type KeySource interface {
	IssuerKeys(ctx context.Context) (issuer string, jwks []byte, err error)
}

// Verifier checks a ServiceAccount token's signature and claims (iss, aud, exp, nbf) against
// the issuer's keys, without an apiserver call per token: a forged token is refused for the
// price of one signature check. A token it accepts still goes to a TokenReview, which alone
// knows whether its pod or ServiceAccount still exists.
type Verifier struct {
	// Audience is the agent's own (contract.Audience(node)).
	Audience string
	// Keys is where the issuer and its keys come from.
	Keys KeySource
	// MinRefresh is the least time between two fetches of the keys, so tokens naming unknown
	// keys cannot turn into a flood of fetches. Default 10s.
	MinRefresh time.Duration
	// FetchTimeout bounds one fetch of the keys, whatever the deadline of the call that
	// started it, so a hung apiserver cannot hold callers. Default 10s.
	FetchTimeout time.Duration
	// Now is the clock; tests move it.
	Now func() time.Time

	mu      sync.Mutex
	issuer  string
	keys    map[string]crypto.PublicKey
	fetched time.Time // last attempt, successful or not
	lastErr error
	fetches int
	// refreshing is closed when the fetch in flight ends; nil when none is.
	refreshing chan struct{}
}

// clockSkew is the leeway on nbf and iat between the apiserver's clock and the agent's.
const clockSkew = time.Minute

// Fetches is how many times the keys were fetched, for tests and metrics.
func (v *Verifier) Fetches() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.fetches
}

// Refresh fetches the keys now unless they were fetched less than MinRefresh ago; the agent
// calls it at start so the first caller does not wait for it.
func (v *Verifier) Refresh(ctx context.Context) error {
	v.mu.Lock()
	if !v.fetched.IsZero() && v.now().Sub(v.fetched) < v.minRefresh() {
		err := v.lastErr
		v.mu.Unlock()
		return err
	}
	// One fetch at a time; the others wait for it, or for their own deadline.
	if wait := v.refreshing; wait != nil {
		v.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return ctx.Err()
		}
		v.mu.Lock()
		defer v.mu.Unlock()
		return v.lastErr
	}
	done := make(chan struct{})
	v.refreshing = done
	v.mu.Unlock()

	timeout := v.FetchTimeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	issuer, raw, err := v.Keys.IssuerKeys(fctx)
	var keys map[string]crypto.PublicKey
	if err == nil {
		keys, err = parseJWKS(raw)
	}
	if err == nil && issuer == "" {
		err = errors.New("the issuer discovery document names no issuer")
	}
	if err != nil {
		err = fmt.Errorf("fetching the service-account issuer keys: %w", err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.fetched, v.lastErr = v.now(), err
	v.fetches++
	v.refreshing = nil
	close(done)
	if err != nil {
		return err
	}
	v.issuer, v.keys = issuer, keys
	return nil
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) minRefresh() time.Duration {
	if v.MinRefresh > 0 {
		return v.MinRefresh
	}
	return 10 * time.Second
}

// key returns the issuer and the key named kid, fetching the keys once (rate-limited) when
// kid is unknown, as after the apiserver's keys rotate. An error that is not
// ErrUnauthenticated means the keys could not be fetched.
func (v *Verifier) key(ctx context.Context, kid string) (string, crypto.PublicKey, error) {
	if issuer, k, _ := v.lookup(kid); k != nil {
		return issuer, k, nil
	}
	err := v.Refresh(ctx)
	issuer, k, loaded := v.lookup(kid)
	switch {
	case k != nil:
		return issuer, k, nil
	case !loaded && err != nil:
		return "", nil, err
	}
	return "", nil, fmt.Errorf("%w: it is not signed by a key of the apiserver's issuer", ErrUnauthenticated)
}

func (v *Verifier) lookup(kid string) (issuer string, key crypto.PublicKey, loaded bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.issuer, v.keys[kid], v.keys != nil
}

// Claims are the verified claims the agent uses.
type Claims struct {
	Issuer    string    `json:"iss"`
	Audience  audiences `json:"aud"`
	Expiry    int64     `json:"exp"`
	NotBefore int64     `json:"nbf"`
}

type jwtHeader struct {
	Alg string `json:"alg"`
	Kid string `json:"kid"`
}

// Verify checks token; it returns ErrUnauthenticated (wrapped with a reason that never quotes
// the token) for anything but a token the issuer signed for this agent and valid now.
func (v *Verifier) Verify(ctx context.Context, token string) (Claims, error) {
	refuse := func(reason string) (Claims, error) {
		return Claims{}, fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return refuse("it is not a JWT")
	}
	var h jwtHeader
	if err := decodeSegment(parts[0], &h); err != nil {
		return refuse("its header is not base64url JSON")
	}
	var c Claims
	if err := decodeSegment(parts[1], &c); err != nil {
		return refuse("its claims are not base64url JSON")
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return refuse("its signature is not base64url")
	}
	// The cheap claims first: they refuse without a key or a signature check.
	if !slices.Contains(c.Audience, v.Audience) {
		return refuse("its audience is not " + v.Audience)
	}
	now := v.now()
	if c.Expiry == 0 {
		return refuse("it has no expiry")
	}
	if !now.Before(time.Unix(c.Expiry, 0)) {
		return refuse("it has expired")
	}
	if c.NotBefore != 0 && now.Add(clockSkew).Before(time.Unix(c.NotBefore, 0)) {
		return refuse("it is not valid yet")
	}
	hash, ok := algHash[h.Alg]
	if !ok {
		return refuse(fmt.Sprintf("its algorithm %q is not one the apiserver signs with", h.Alg))
	}
	if h.Kid == "" {
		return refuse("it names no key")
	}
	issuer, key, err := v.key(ctx, h.Kid)
	if err != nil {
		return Claims{}, err
	}
	digest := hashOf(hash, parts[0]+"."+parts[1])
	if !verifySignature(h.Alg, key, digest, sig) {
		return refuse("its signature is not valid")
	}
	if c.Issuer != issuer {
		return refuse("its issuer is not the apiserver's")
	}
	return c, nil
}

var algHash = map[string]crypto.Hash{
	"RS256": crypto.SHA256, "RS384": crypto.SHA384, "RS512": crypto.SHA512,
	"ES256": crypto.SHA256, "ES384": crypto.SHA384, "ES512": crypto.SHA512,
}

func hashOf(h crypto.Hash, s string) []byte {
	switch h {
	case crypto.SHA384:
		d := sha512.Sum384([]byte(s))
		return d[:]
	case crypto.SHA512:
		d := sha512.Sum512([]byte(s))
		return d[:]
	default:
		d := sha256.Sum256([]byte(s))
		return d[:]
	}
}

// verifySignature checks sig with key for alg; the key's type and curve must be the
// algorithm's, so a token cannot pick how its key is used.
func verifySignature(alg string, key crypto.PublicKey, digest, sig []byte) bool {
	switch k := key.(type) {
	case *rsa.PublicKey:
		if !strings.HasPrefix(alg, "RS") {
			return false
		}
		return rsa.VerifyPKCS1v15(k, algHash[alg], digest, sig) == nil
	case *ecdsa.PublicKey:
		want := map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}[alg]
		if want == nil || k.Curve != want {
			return false
		}
		size := (k.Curve.Params().BitSize + 7) / 8
		if len(sig) != 2*size {
			return false
		}
		r, s := new(big.Int).SetBytes(sig[:size]), new(big.Int).SetBytes(sig[size:])
		return ecdsa.Verify(k, digest, r, s)
	}
	return false
}

func decodeSegment(seg string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Use string `json:"use"`
	N   string `json:"n"`
	E   string `json:"e"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS reads the RSA and EC signing keys of a JWK set; keys of other types or uses are
// skipped, a set with no usable key is an error.
func parseJWKS(raw []byte) (map[string]crypto.PublicKey, error) {
	var set struct {
		Keys []jwk `json:"keys"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return nil, fmt.Errorf("the JWKS is not JSON: %w", err)
	}
	keys := map[string]crypto.PublicKey{}
	for _, k := range set.Keys {
		if k.Kid == "" || (k.Use != "" && k.Use != "sig") {
			continue
		}
		var key crypto.PublicKey
		var err error
		switch k.Kty {
		case "RSA":
			key, err = rsaKey(k)
		case "EC":
			key, err = ecKey(k)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("key %s: %w", k.Kid, err)
		}
		keys[k.Kid] = key
	}
	if len(keys) == 0 {
		return nil, errors.New("the JWKS holds no RSA or EC signing key")
	}
	return keys, nil
}

func rsaKey(k jwk) (*rsa.PublicKey, error) {
	n, err1 := base64.RawURLEncoding.DecodeString(k.N)
	e, err2 := base64.RawURLEncoding.DecodeString(k.E)
	if err := errors.Join(err1, err2); err != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
		return nil, errors.New("invalid RSA modulus or exponent")
	}
	exp := int(new(big.Int).SetBytes(e).Int64())
	if exp < 3 || len(n)*8 < 2048 {
		return nil, errors.New("RSA key too weak")
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}, nil
}

func ecKey(k jwk) (*ecdsa.PublicKey, error) {
	curve := map[string]elliptic.Curve{"P-256": elliptic.P256(), "P-384": elliptic.P384(), "P-521": elliptic.P521()}[k.Crv]
	if curve == nil {
		return nil, fmt.Errorf("unsupported curve %q", k.Crv)
	}
	x, err1 := base64.RawURLEncoding.DecodeString(k.X)
	y, err2 := base64.RawURLEncoding.DecodeString(k.Y)
	if err := errors.Join(err1, err2); err != nil {
		return nil, errors.New("invalid EC coordinates")
	}
	size := (curve.Params().BitSize + 7) / 8
	if len(x) != size || len(y) != size {
		return nil, errors.New("EC coordinates of the wrong size")
	}
	// Uncompressed point encoding, parsed by crypto/ecdh-backed code that rejects points off
	// the curve.
	point := append(append([]byte{4}, x...), y...)
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("invalid EC point: %w", err)
	}
	return pub, nil
}

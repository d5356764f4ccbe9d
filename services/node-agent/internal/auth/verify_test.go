package auth_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opsuite/suite/services/node-agent/internal/auth"
)

// issuer signs tokens the way the apiserver does (JWS compact, RS256 or ES256, kid) and
// serves its keys as a JWKS; the real apiserver's keys are used in package kube.
type issuer struct {
	url  string
	keys map[string]crypto.Signer

	mu      sync.Mutex
	fail    error
	fetches int
}

func newIssuer(t *testing.T, url string) *issuer {
	t.Helper()
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ek, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &issuer{url: url, keys: map[string]crypto.Signer{"rsa-1": rk, "ec-1": ek}}
}

func (i *issuer) IssuerKeys(context.Context) (string, []byte, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	i.fetches++
	if i.fail != nil {
		return "", nil, i.fail
	}
	enc := base64.RawURLEncoding.EncodeToString
	var keys []map[string]string
	for kid, k := range i.keys {
		switch pub := k.Public().(type) {
		case *rsa.PublicKey:
			keys = append(keys, map[string]string{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
				"n": enc(pub.N.Bytes()), "e": enc(big.NewInt(int64(pub.E)).Bytes())})
		case *ecdsa.PublicKey:
			b, _ := pub.Bytes()
			keys = append(keys, map[string]string{"kty": "EC", "kid": kid, "use": "sig", "alg": "ES256", "crv": "P-256",
				"x": enc(b[1:33]), "y": enc(b[33:])})
		}
	}
	raw, err := json.Marshal(map[string]any{"keys": keys})
	return i.url, raw, err
}

// sign makes a token with header alg/kid and claims, signed by the issuer's key kid (or by
// signer when given).
func (i *issuer) sign(t *testing.T, alg, kid string, claims map[string]any, signer crypto.Signer) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	h, _ := json.Marshal(map[string]string{"alg": alg, "kid": kid, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := enc(h) + "." + enc(c)
	if signer == nil {
		signer = i.keys[kid]
	}
	d := sha256.Sum256([]byte(input))
	var sig []byte
	switch k := signer.(type) {
	case *rsa.PrivateKey:
		s, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = s
	case *ecdsa.PrivateKey:
		r, s, err := ecdsa.Sign(rand.Reader, k, d[:])
		if err != nil {
			t.Fatal(err)
		}
		sig = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...)
	}
	return input + "." + enc(sig)
}

func (i *issuer) count() int {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.fetches
}

func TestVerifier(t *testing.T) {
	ctx := context.Background()
	const aud = "nodeagent.opsuite.io/node-a"
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	iss := newIssuer(t, "https://kubernetes.default.svc.cluster.local")
	other := newIssuer(t, "https://evil.example")
	v := &auth.Verifier{Audience: aud, Keys: iss, MinRefresh: 10 * time.Second, Now: clk.now}
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": iss.url, "aud": []string{aud}, "sub": "system:serviceaccount:ns:sa",
			"exp": clk.t.Add(time.Hour).Unix(), "nbf": clk.t.Unix(), "iat": clk.t.Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	good := iss.sign(t, "ES256", "ec-1", claims(nil), nil)
	enc := base64.RawURLEncoding.EncodeToString
	hmacToken := func() string {
		// Algorithm confusion: HS256 keyed with what an attacker can read (the public key).
		h, _ := json.Marshal(map[string]string{"alg": "HS256", "kid": "rsa-1"})
		c, _ := json.Marshal(claims(nil))
		input := enc(h) + "." + enc(c)
		m := hmac.New(sha256.New, []byte(iss.url))
		m.Write([]byte(input))
		return input + "." + enc(m.Sum(nil))
	}
	tampered := func() string {
		parts := strings.Split(good, ".")
		c, _ := json.Marshal(claims(func(c map[string]any) { c["sub"] = "system:serviceaccount:kube-system:admin" }))
		return parts[0] + "." + enc(c) + "." + parts[2]
	}
	cases := []struct {
		name, token, reason string
	}{
		{"ES256 of the issuer", good, ""},
		{"RS256 of the issuer", iss.sign(t, "RS256", "rsa-1", claims(nil), nil), ""},
		{"aud as a string", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { c["aud"] = aud }), nil), ""},
		{"not a JWT", "garbage", "not a JWT"},
		{"tampered claims", tampered(), "signature is not valid"},
		{"another issuer's key", other.sign(t, "ES256", "ec-1", claims(nil), other.keys["ec-1"]), "signature is not valid"},
		{"signed by the issuer's key, another issuer", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { c["iss"] = other.url }), nil), "issuer is not the apiserver's"},
		{"signed, another audience", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { c["aud"] = []string{"nodeagent.opsuite.io/node-b"} }), nil), "audience is not " + aud},
		{"signed, expired", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { c["exp"] = clk.t.Unix() }), nil), "expired"},
		{"signed, no expiry", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { delete(c, "exp") }), nil), "no expiry"},
		{"signed, not valid yet", iss.sign(t, "ES256", "ec-1", claims(func(c map[string]any) { c["nbf"] = clk.t.Add(time.Hour).Unix() }), nil), "not valid yet"},
		{"alg none", enc([]byte(`{"alg":"none","kid":"ec-1"}`)) + "." + enc(must(json.Marshal(claims(nil)))) + ".", "algorithm \"none\""},
		{"HS256 with a public value", hmacToken(), "algorithm \"HS256\""},
		{"ES256 header on the RSA key", iss.sign(t, "ES256", "rsa-1", claims(nil), iss.keys["ec-1"]), "signature is not valid"},
		{"no kid", iss.sign(t, "ES256", "", claims(nil), iss.keys["ec-1"]), "names no key"},
		{"unknown kid", iss.sign(t, "ES256", "ec-2", claims(nil), other.keys["ec-1"]), "not signed by a key of the apiserver's issuer"},
	}
	for _, c := range cases {
		got, err := v.Verify(ctx, c.token)
		switch {
		case c.reason == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.reason == "" && got.Issuer != iss.url:
			t.Errorf("%s: claims %+v", c.name, got)
		case c.reason != "" && (!errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), c.reason)):
			t.Errorf("%s: got %v, want ErrUnauthenticated with %q", c.name, err, c.reason)
		}
	}
	// The keys were fetched once; the unknown kid asked for no refresh within MinRefresh.
	if n := iss.count(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}

	// Unknown kids refresh the keys at most once per MinRefresh, and a rotated-in key is
	// found by that refresh.
	rotated, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	newKid := iss.sign(t, "ES256", "ec-2", claims(nil), rotated)
	for range 1000 {
		if _, err := v.Verify(ctx, iss.sign(t, "ES256", "forged", claims(nil), rotated)); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	if n := iss.count(); n != 1 {
		t.Fatalf("1000 unknown kids within MinRefresh: %d fetches, want still 1", n)
	}
	iss.mu.Lock()
	iss.keys["ec-2"] = rotated
	iss.mu.Unlock()
	clk.t = clk.t.Add(11 * time.Second)
	if _, err := v.Verify(ctx, newKid); err != nil {
		t.Fatalf("a rotated-in key: %v", err)
	}
	if n := iss.count(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}

	// Keys that cannot be fetched are the agent's problem, not the caller's: not
	// ErrUnauthenticated (the policy answers Unavailable), and retried at most per MinRefresh.
	down := newIssuer(t, iss.url)
	down.fail = errors.New("connection refused")
	v2 := &auth.Verifier{Audience: aud, Keys: down, Now: clk.now}
	for range 100 {
		if _, err := v2.Verify(ctx, good); err == nil || errors.Is(err, auth.ErrUnauthenticated) || !strings.Contains(err.Error(), "connection refused") {
			t.Fatalf("keys unavailable: %v", err)
		}
	}
	if n := down.count(); n != 1 {
		t.Fatalf("%d fetches while the apiserver is down, want 1", n)
	}
}

// TestVerifiedAuthenticator: only verified tokens reach the review; refusals are not cached.
func TestVerifiedAuthenticator(t *testing.T) {
	ctx := context.Background()
	const aud = "nodeagent.opsuite.io/node-a"
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	iss := newIssuer(t, "https://kubernetes.default.svc.cluster.local")
	claims := map[string]any{"iss": iss.url, "aud": aud, "exp": clk.t.Add(time.Hour).Unix()}
	good := iss.sign(t, "ES256", "ec-1", claims, nil)
	next := &countingAuthn{users: map[string]string{good: "reader"}}
	a := auth.NewVerifiedAuthenticator(next, &auth.Verifier{Audience: aud, Keys: iss, Now: clk.now}, auth.CacheConfig{})
	a.Now = clk.now
	parts := strings.Split(good, ".")
	for i := range 2000 {
		forged := parts[0] + "." + parts[1] + "." + base64.RawURLEncoding.EncodeToString([]byte{byte(i), byte(i >> 8)})
		if _, err := a.Authenticate(ctx, forged); !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	if next.calls != 0 {
		t.Fatalf("2000 forged tokens cost %d reviews, want 0", next.calls)
	}
	if a.Known(good) {
		t.Fatal("a token never reviewed is known")
	}
	if id, err := a.Authenticate(ctx, good); err != nil || id.User != "reader" || next.calls != 1 {
		t.Fatalf("%v %v, %d reviews", id, err, next.calls)
	}
	if !a.Known(good) {
		t.Fatal("an authenticated token is not known")
	}
	// Past the review cache (reviewed again in case it was revoked), still known until it
	// expires.
	clk.t = clk.t.Add(time.Minute)
	if !a.Known(good) {
		t.Fatal("a token authenticated a minute ago is not known")
	}
	if _, err := a.Authenticate(ctx, good); err != nil || next.calls != 2 {
		t.Fatalf("%v, %d reviews, want 2", err, next.calls)
	}
	clk.t = clk.t.Add(time.Hour)
	if a.Known(good) {
		t.Fatal("an expired token is known")
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// hungSource answers only when the caller gives up, as an apiserver that accepts the
// connection and never replies.
type hungSource struct{ calls atomic.Int32 }

func (h *hungSource) IssuerKeys(ctx context.Context) (string, []byte, error) {
	h.calls.Add(1)
	<-ctx.Done()
	return "", nil, ctx.Err()
}

// TestVerifierHungKeys: while the keys' fetch hangs, callers wait no longer than their own
// deadline, only one fetch is made, and the answer is not Unauthenticated.
func TestVerifierHungKeys(t *testing.T) {
	const aud = "nodeagent.opsuite.io/node-a"
	iss := newIssuer(t, "https://kubernetes.default.svc.cluster.local")
	tok := iss.sign(t, "ES256", "ec-1", map[string]any{"iss": iss.url, "aud": aud, "exp": time.Now().Add(time.Hour).Unix()}, nil)
	src := &hungSource{}
	v := &auth.Verifier{Audience: aud, Keys: src, FetchTimeout: 2 * time.Second}
	var wg sync.WaitGroup
	start := time.Now()
	// The first caller has no deadline: the fetch it starts ends at FetchTimeout.
	first := make(chan error, 1)
	go func() { _, err := v.Verify(context.Background(), tok); first <- err }()
	for src.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			if _, err := v.Verify(ctx, tok); err == nil || errors.Is(err, auth.ErrUnauthenticated) {
				t.Errorf("a hung fetch: %v", err)
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("callers with a 200ms deadline waited %s", d)
	}
	select {
	case err := <-first:
		if err == nil || errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatalf("the first caller: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the fetch outlived FetchTimeout")
	}
	if n := src.calls.Load(); n != 1 {
		t.Fatalf("%d fetches, want 1", n)
	}
}
